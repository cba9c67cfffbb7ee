//go:build privileged

package vmtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/systemd"
)

// The bootloader row (hack/vm/test-kernels.sh, 6.12-grub-cgroup2) boots
// through OVMF and real GRUB, not qemu's direct kernel boot, five times
// (grubBoots). The package's own three boots:
//
//  1. TestBootArgsGRUB regenerates the distribution's configuration
//     (update-grub, the baseline), stages isolation arguments for CPU 1
//     through the agent's drop-in and update-grub on the host (a transient
//     systemd unit), and asks for a reboot;
//  2. TestBootArgsGRUBStaged finds a new boot id, every argument in
//     /proc/cmdline and CPU 1 in the kernel's nohz_full, reverts, checks the
//     drop-in gone and grub.cfg back byte for byte, and asks for a reboot;
//  3. TestBootArgsGRUBReverted finds a new boot id, /proc/cmdline byte for
//     byte the first boot's and grub.cfg the baseline.
//
// Then the agent's own passes (bootloop_test.go) from the third boot on.

// grubBoots is the bootloader row's sequence: the tests each boot runs, in
// source order (boot 1 is guest.sh's phase "", boot N its ".bootN"). Both
// families stage through the one drop-in and reboot through guest.sh's one
// marker, so they take turns; the agent's first pass shares the package's
// last boot (its baseline is that boot's configuration), which saves a
// sixth boot and the second VM a row of its own would start.
var grubBoots = [][]string{
	{"TestBootArgsGRUB"},
	{"TestBootArgsGRUBStaged"},
	{"TestBootArgsGRUBReverted", "TestBootAgentGRUB"},
	{"TestBootAgentGRUBBooted", "TestBootAgentGRUBForged"},
	{"TestBootAgentGRUBReverted"},
}

// grubBoot is the index in grubBoots of the boot test name runs in.
func grubBoot(t *testing.T, name string) int {
	t.Helper()
	for i, tests := range grubBoots {
		if slices.Contains(tests, name) {
			return i
		}
	}
	t.Fatalf("%s is in no boot of grubBoots", name)
	return -1
}

// grubPhase is guest.sh's LATENCYTIER_VM_PHASE in boot i of grubBoots.
func grubPhase(i int) string {
	if i == 0 {
		return ""
	}
	return fmt.Sprintf(".boot%d", i+1)
}

const grubCfg = "/boot/grub/grub.cfg"

// grubRow skips the test outside the bootloader row and outside its boot
// of grubBoots.
func grubRow(t *testing.T) *host.Root {
	t.Helper()
	root, row := vm(t)
	if !strings.Contains(row, "-grub") {
		t.Skip("bootloader row only (6.12-grub-cgroup2)")
	}
	if got, phase := os.Getenv("LATENCYTIER_VM_PHASE"), grubPhase(grubBoot(t, t.Name())); got != phase {
		t.Skipf("boot phase %q, this test runs in %q", got, phase)
	}
	return root
}

func grubStager(root *host.Root) bootargs.GRUB {
	return bootargs.GRUB{Root: root, Run: func(ctx context.Context, unit string, argv []string) error {
		return systemd.Run(ctx, root, unit, argv, 10*time.Minute)
	}}
}

func saveState(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll("/var/lib/latencytier-vmtest", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stateFile(name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func loadState(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(stateFile(name))
	if err != nil {
		t.Fatalf("state from the boot before: %v", err)
	}
	return string(b)
}

// askReboot leaves guest.sh's marker: reboot, then run the tests of the
// boot after t's in grubBoots.
func askReboot(t *testing.T) {
	t.Helper()
	i := grubBoot(t, t.Name()) + 1
	if i == len(grubBoots) {
		t.Fatalf("%s asked for a reboot after the last boot of grubBoots", t.Name())
	}
	saveState(t, "reboot", "agent_vmtest ^("+strings.Join(grubBoots[i], "|")+")$")
}

// cmdline is the running kernel's command line as the kernel has it, every
// byte (read trims).
func cmdline(t *testing.T, root *host.Root) string {
	t.Helper()
	b, err := root.ReadFile(root.Proc("cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func bootID(t *testing.T, root *host.Root) string {
	return read(t, root, root.Proc("sys", "kernel", "random", "boot_id"))
}

func TestBootArgsGRUB(t *testing.T) {
	root := grubRow(t)
	if b := bootargs.Detect(root); b.Kind != bootargs.KindGRUB {
		t.Fatalf("backend %s (%s), want GRUB", b.Kind, b.Reason)
	}
	ctx := context.Background()
	g := grubStager(root)
	// The distribution's own configuration, as update-grub writes it.
	start := time.Now()
	if err := g.Run(ctx, "latencytier-update-grub.service", []string{"/usr/sbin/update-grub"}); err != nil {
		t.Fatalf("baseline update-grub: %v", err)
	}
	t.Logf("update-grub took %s", time.Since(start).Round(time.Second))
	baseline, err := os.ReadFile(grubCfg)
	if err != nil {
		t.Fatal(err)
	}
	online, err := cpulist.Online(root)
	if err != nil {
		t.Fatal(err)
	}
	if online.Size() < 2 {
		t.Fatalf("online CPUs %s: the row needs two", online)
	}
	args, err := bootargs.Derive(online, cpuset.New(0), cpuset.New(1), bootargs.Extras{SkewTick: true})
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := g.Stage(ctx, args, "vmtest"); err != nil || !changed {
		t.Fatalf("stage: changed %v, %v", changed, err)
	}
	cfg, err := os.ReadFile(grubCfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), bootargs.Line(args)) {
		t.Fatalf("%s after staging lacks %q:\n%s", grubCfg, bootargs.Line(args), cfg)
	}
	saveState(t, "grub-baseline", string(baseline))
	saveState(t, "grub-cmdline", cmdline(t, root))
	saveState(t, "grub-args", bootargs.Line(args))
	saveState(t, "grub-boot", bootID(t, root))
	askReboot(t)
}

func TestBootArgsGRUBStaged(t *testing.T) {
	root := grubRow(t)
	if bootID(t, root) == loadState(t, "grub-boot") {
		t.Fatal("boot id unchanged: the VM did not reboot")
	}
	args := bootargs.Parse(loadState(t, "grub-args"))
	b := bootargs.Check(root, args)
	if len(b.Missing) > 0 {
		t.Errorf("after the reboot /proc/cmdline lacks %q (has %q)", b.Missing, read(t, root, root.Proc("cmdline")))
	}
	if b.NohzFull != "1" {
		t.Errorf("the kernel's nohz_full CPUs are %q, want 1", b.NohzFull)
	}
	t.Logf("kernel view: isolated %q, nohz_full %q", b.Isolated, b.NohzFull)
	g := grubStager(root)
	if changed, err := g.Revert(context.Background()); err != nil || !changed {
		t.Fatalf("revert: changed %v, %v", changed, err)
	}
	if root.Exists(root.Path(bootargs.DropIn)) {
		t.Error("drop-in left after revert")
	}
	cfg, err := os.ReadFile(grubCfg)
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg) != loadState(t, "grub-baseline") {
		t.Errorf("%s after revert differs from the distribution's own:\n%s", grubCfg, cfg)
	}
	saveState(t, "grub-boot", bootID(t, root))
	askReboot(t)
}

func TestBootArgsGRUBReverted(t *testing.T) {
	root := grubRow(t)
	if bootID(t, root) == loadState(t, "grub-boot") {
		t.Fatal("boot id unchanged: the VM did not reboot")
	}
	args := bootargs.Parse(loadState(t, "grub-args"))
	b := bootargs.Check(root, args)
	if len(b.Present) > 0 {
		t.Errorf("after revert and reboot /proc/cmdline still holds %q", b.Present)
	}
	if b.NohzFull != "" {
		t.Errorf("the kernel's nohz_full CPUs are %q after revert, want none", b.NohzFull)
	}
	if got, first := cmdline(t, root), loadState(t, "grub-cmdline"); got != first {
		t.Errorf("/proc/cmdline after revert and reboot\n  %q\nis not the first boot's\n  %q", got, first)
	}
	cfg, _ := os.ReadFile(grubCfg)
	if string(cfg) != loadState(t, "grub-baseline") {
		t.Errorf("%s differs from the distribution's own after the reboot", grubCfg)
	}
}
