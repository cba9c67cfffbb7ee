//go:build privileged

package vmtest

import (
	"context"
	"os"
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
// through OVMF and real GRUB, not qemu's direct kernel boot, three times:
//
//  1. TestBootArgsGRUB regenerates the distribution's configuration
//     (update-grub, the baseline), stages isolation arguments for CPU 1
//     through the agent's drop-in and update-grub on the host (a transient
//     systemd unit), and asks for a reboot;
//  2. TestBootArgsGRUBStaged finds a new boot id, every argument in
//     /proc/cmdline and CPU 1 in the kernel's nohz_full, reverts, checks the
//     drop-in gone and grub.cfg back byte for byte, and asks for a reboot;
//  3. TestBootArgsGRUBReverted finds a new boot id and a command line
//     without the arguments.

const grubCfg = "/boot/grub/grub.cfg"

func grubRow(t *testing.T, phase string) *host.Root {
	t.Helper()
	root, row := vm(t)
	if !strings.Contains(row, "-grub") {
		t.Skip("bootloader row only (6.12-grub-cgroup2)")
	}
	if got := os.Getenv("LATENCYTIER_VM_PHASE"); got != phase {
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

func askReboot(t *testing.T, next string) {
	t.Helper()
	saveState(t, "reboot", "agent_vmtest ^"+next+"$")
}

func bootID(t *testing.T, root *host.Root) string {
	return read(t, root, root.Proc("sys", "kernel", "random", "boot_id"))
}

func TestBootArgsGRUB(t *testing.T) {
	root := grubRow(t, "")
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
	saveState(t, "grub-args", bootargs.Line(args))
	saveState(t, "grub-boot", bootID(t, root))
	askReboot(t, "TestBootArgsGRUBStaged")
}

func TestBootArgsGRUBStaged(t *testing.T) {
	root := grubRow(t, ".boot2")
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
	askReboot(t, "TestBootArgsGRUBReverted")
}

func TestBootArgsGRUBReverted(t *testing.T) {
	root := grubRow(t, ".boot3")
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
	cfg, _ := os.ReadFile(grubCfg)
	if string(cfg) != loadState(t, "grub-baseline") {
		t.Errorf("%s differs from the distribution's own after the reboot", grubCfg)
	}
}
