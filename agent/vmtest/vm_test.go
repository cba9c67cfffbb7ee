//go:build privileged

package vmtest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/sysctl"
	"latencytier.io/latencytier/agent/systemd"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

// vm skips the test outside a hack/vm guest and returns the real root and
// the matrix row ("6.1-cgroup2", ...).
func vm(t *testing.T) (*host.Root, string) {
	t.Helper()
	if os.Getenv("LATENCYTIER_VM") != "1" {
		t.Skip("runs only inside a hack/vm guest (make test-kernels)")
	}
	kernellock.Lock(t)
	return host.New("/"), os.Getenv("LATENCYTIER_VM_ROW")
}

func engine(root *host.Root) *apply.Engine { return &apply.Engine{Root: root, Log: logr.Discard()} }

func read(t *testing.T, root *host.Root, path string) string {
	t.Helper()
	v, err := root.ReadString(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return v
}

func cgroupV2() bool {
	var st syscall.Statfs_t
	return syscall.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == 0x63677270 // CGROUP2_SUPER_MAGIC
}

// The row booted what it claims, so a green row proves what the README
// says it proves: the kernel series, the cgroup hierarchy, systemd as init
// with its private socket, and the scheduler behind debugfs.
func TestRowIsWhatItSays(t *testing.T) {
	root, row := vm(t)
	rel := read(t, root, root.Proc("sys", "kernel", "osrelease"))
	series, _, _ := strings.Cut(row, "-")
	if !strings.HasPrefix(rel, series+".") {
		t.Errorf("row %s booted kernel %s", row, rel)
	}
	if want := strings.HasSuffix(row, "cgroup2"); cgroupV2() != want {
		t.Errorf("row %s: /sys/fs/cgroup is cgroup2: %v", row, cgroupV2())
	}
	if !systemd.Booted(root) {
		t.Errorf("systemd is not booted (or %s is missing)", root.Path("run", "systemd", "private"))
	}
	l, err := sysctl.Probe(root, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := series != "6.1"; l.EEVDF != want || l.DebugfsMissing {
		t.Errorf("kernel %s: layout %+v, want EEVDF=%v with debugfs mounted", rel, l, want)
	}
	extRow(t, root, row, rel)
}

// extRow: a row named *-ext-* booted a kernel with sched_ext and no BPF
// scheduler loaded (state disabled) and with BTF, which a sched_ext
// scheduler needs to load; every other row's kernel has no sched_ext, so
// what they test is the fair class whatever the agent reads.
func extRow(t *testing.T, root *host.Root, row, rel string) {
	t.Helper()
	state := root.Sys("kernel", "sched_ext", "state")
	if !strings.Contains(row, "-ext-") {
		if _, err := os.Stat(root.Sys("kernel", "sched_ext")); !os.IsNotExist(err) {
			t.Errorf("row %s (kernel %s) is not an -ext- row but has %s: %v", row, rel, root.Sys("kernel", "sched_ext"), err)
		}
		return
	}
	if v, err := root.ReadString(state); err != nil || v != "disabled" {
		t.Errorf("row %s (kernel %s): %s = %q, %v; want disabled (sched_ext built in, no scheduler loaded)", row, rel, state, v, err)
	}
	if fi, err := os.Stat(root.Sys("kernel", "btf", "vmlinux")); err != nil || fi.Size() == 0 {
		t.Errorf("row %s (kernel %s): no kernel BTF: %v", row, rel, err)
	}
}

// The typed scheduler knobs this kernel has, through the real mapping and
// engine: CFS (6.1) gets latency_ns, min_granularity_ns,
// wakeup_granularity_ns, migration_cost_ns in debugfs; EEVDF (6.12)
// base_slice_ns and migration_cost_ns, with latency and wakeup granularity
// Unsupported. Apply writes and verifies them; Revert puts back exactly
// what the kernel had.
func TestSchedulerDebugfsKnobsApplyAndRevertExactly(t *testing.T) {
	root, _ := vm(t)
	l, err := sysctl.Probe(root, true)
	if err != nil {
		t.Fatal(err)
	}
	d := func(v time.Duration) *metav1.Duration { return &metav1.Duration{Duration: v} }
	spec := &v1alpha1.SchedulerSpec{MigrationCost: d(123457 * time.Nanosecond), BaseSlice: d(1234567 * time.Nanosecond),
		Latency: d(9876543 * time.Nanosecond), WakeupGranularity: d(2345678 * time.Nanosecond)}
	knobs, results := sysctl.Knobs(root, l, spec, nil, nil)
	files := map[string]string{"migration_cost_ns": "123457", "latency_ns": "9876543",
		"min_granularity_ns": "1234567", "wakeup_granularity_ns": "2345678"}
	if l.EEVDF {
		files = map[string]string{"migration_cost_ns": "123457", "base_slice_ns": "1234567"}
		if len(results) != 2 {
			t.Errorf("EEVDF: want latency and wakeupGranularity Unsupported, got %+v", results)
		}
	} else if len(results) != 0 {
		t.Errorf("CFS: every typed knob should exist, got %+v", results)
	}
	if len(knobs) != len(files) {
		t.Fatalf("knobs %+v, want one per %v", knobs, files)
	}
	before := map[string]string{}
	for f := range files {
		before[f] = read(t, root, root.DebugSched(f))
	}
	e := engine(root)
	t.Cleanup(func() { _, _ = e.Revert() })
	rep, err := e.Apply(apply.Meta{Profile: "vm"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.State != v1alpha1.SettingApplied {
			t.Errorf("%s: %s %s", r.Setting, r.State, r.Message)
		}
	}
	for f, want := range files {
		if got := read(t, root, root.DebugSched(f)); got != want {
			t.Errorf("after apply %s = %s, want %s", f, got, want)
		}
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	for f, want := range before {
		if got := read(t, root, root.DebugSched(f)); got != want {
			t.Errorf("after revert %s = %s, want the original %s", f, got, want)
		}
	}
}

// With debugfs unmounted (systemd mounts it at boot), Probe(mount=true)
// mounts it once, the knobs resolve through it, and a full Revert unmounts
// exactly that mount again.
func TestDebugfsMountedForTheKnobsAndReleasedByRevert(t *testing.T) {
	root, _ := vm(t)
	dir := root.Sys("kernel", "debug")
	if err := syscall.Unmount(dir, 0); err != nil {
		t.Fatalf("unmount systemd's debugfs: %v", err)
	}
	t.Cleanup(func() {
		if !isDebugfs(dir) {
			_ = syscall.Mount("debugfs", dir, "debugfs", 0, "")
		}
	})
	l, err := sysctl.Probe(root, true)
	if err != nil || !l.DebugfsMounted {
		t.Fatalf("Probe: layout %+v, err %v; want it to mount debugfs", l, err)
	}
	if _, err := sysctl.Probe(root, true); err != nil || countDebugfs(t, dir) != 1 {
		t.Fatalf("a second Probe: err %v, %d debugfs mounts, want 1", err, countDebugfs(t, dir))
	}
	spec := &v1alpha1.SchedulerSpec{MigrationCost: &metav1.Duration{Duration: 234567}}
	knobs, results := sysctl.Knobs(root, l, spec, nil, nil)
	if len(knobs) != 1 || len(results) != 0 {
		t.Fatalf("knobs %+v results %+v", knobs, results)
	}
	e := engine(root)
	if _, err := e.Apply(apply.Meta{Profile: "vm"}, knobs); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if n := countDebugfs(t, dir); n != 0 {
		t.Errorf("after a full revert %d debugfs mounts at %s, want the agent's own removed", n, dir)
	}
}

func isDebugfs(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == 0x64626720
}

func countDebugfs(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 8 && f[4] == dir && strings.Contains(line, " - debugfs ") {
			n++
		}
	}
	return n
}

// applyOne applies knobs and fails the test unless every one is Applied.
func applyOne(t *testing.T, e *apply.Engine, knobs ...knob.Knob) {
	t.Helper()
	rep, err := e.Apply(apply.Meta{Profile: "vm"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.State != v1alpha1.SettingApplied {
			t.Fatalf("%s: %s %s", r.Setting, r.State, r.Message)
		}
	}
}

// stateFile is where a test keeps what its after-reboot half checks.
func stateFile(name string) string { return filepath.Join("/var/lib/latencytier-vmtest", name) }

// migrationCostKnob is the typed migrationCost knob set to v nanoseconds.
func migrationCostKnob(t *testing.T, root *host.Root, v int64) knob.Knob {
	t.Helper()
	l, err := sysctl.Probe(root, true)
	if err != nil {
		t.Fatal(err)
	}
	knobs, results := sysctl.Knobs(root, l, &v1alpha1.SchedulerSpec{MigrationCost: &metav1.Duration{Duration: time.Duration(v)}}, nil, nil)
	if len(knobs) != 1 {
		t.Fatalf("migrationCost: %+v", results)
	}
	return knobs[0]
}

// The first half of the journal-across-reboot test (the last test of the
// package on purpose: the other tests' reverts would consume its journal).
// It applies migrationCost, leaves it applied with its journal, records
// the boot and the original, and asks hack/vm/guest.sh for a reboot, after
// which TestJournalAcrossRebootAfterReboot runs.
func TestJournalAcrossReboot(t *testing.T) {
	root, _ := vm(t)
	if os.Getenv("LATENCYTIER_VM_PHASE") != "" {
		t.Skip("first boot only")
	}
	if os.Getenv("LATENCYTIER_VM_REBOOT") != "1" {
		t.Skip("this row does not reboot (hack/vm/test-kernels.sh reboots one row: the journal and boot id do not depend on the kernel)")
	}
	k := migrationCostKnob(t, root, 345678)
	orig := read(t, root, k.Path)
	applyOne(t, engine(root), k)
	boot := read(t, root, root.Proc("sys", "kernel", "random", "boot_id"))
	if err := os.MkdirAll(filepath.Dir(stateFile("x")), 0o755); err != nil {
		t.Fatal(err)
	}
	state := boot + "\n" + orig + "\n"
	if err := os.WriteFile(stateFile("journal-reboot"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stateFile("reboot"), []byte("agent_vmtest"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// After the reboot: the boot id changed, the kernel is back at its boot
// value, and a Revert must not write the previous boot's original onto
// this boot: a value someone set since (here 456789) stays, and the stale
// journal is discarded.
func TestJournalAcrossRebootAfterReboot(t *testing.T) {
	root, _ := vm(t)
	if os.Getenv("LATENCYTIER_VM_PHASE") != ".boot2" {
		t.Skip("runs on the second boot of hack/vm/guest.sh")
	}
	b, err := os.ReadFile(stateFile("journal-reboot"))
	if err != nil {
		t.Fatalf("the first boot left no state: %v", err)
	}
	lines := strings.Split(string(b), "\n")
	prevBoot, orig := lines[0], lines[1]
	if boot := read(t, root, root.Proc("sys", "kernel", "random", "boot_id")); boot == prevBoot {
		t.Fatalf("boot id %s did not change across the reboot", boot)
	}
	k := migrationCostKnob(t, root, 345678)
	if got := read(t, root, k.Path); got != orig {
		t.Fatalf("after the reboot %s = %s, want the boot value %s", k.Path, got, orig)
	}
	if err := root.WriteString(k.Path, "456789"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = root.WriteString(k.Path, orig) })
	rep, err := engine(root).Revert()
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, root, k.Path); got != "456789" {
		t.Errorf("Revert on the new boot wrote %s = %s; the previous boot's original must not be restored (notes %v)", k.Path, got, rep.Notes)
	}
	if _, err := os.Stat(journal.Path(root)); err == nil {
		t.Errorf("the previous boot's journal is still there after Revert")
	}
}
