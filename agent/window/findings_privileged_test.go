//go:build privileged

package window

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/findings"

	"golang.org/x/sys/unix"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
	"latencytier.io/latencytier/internal/privtest"
)

// setSysctl writes a real sysctl and restores it in t.Cleanup; the caller
// holds the kernellock.
func setSysctl(t *testing.T, name, val string) {
	t.Helper()
	r := host.New("/")
	p, err := r.SysctlPath(name)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := r.ReadString(p)
	if err != nil {
		privtest.Missing(t, "%s not readable here: %v", name, err)
	}
	t.Cleanup(func() {
		if err := r.WriteString(p, orig); err != nil {
			t.Errorf("restoring %s=%s: %v", name, orig, err)
		}
	})
	if err := r.WriteString(p, val); err != nil {
		t.Fatalf("writing %s=%s: %v", name, val, err)
	}
}

// TestFindingSysctlsRealKernel sets real sysctls and checks the findings
// that read them. Both cases run under one kernellock: the lock is often held
// for minutes at a time (benchmarks, demos, other packages' tests), so each
// separate Lock could cost a full wait.
func TestFindingSysctlsRealKernel(t *testing.T) {
	privtest.Root(t)
	kernellock.Lock(t)
	t.Run("autogroup", testFindingAutogroupRealKernel)
	t.Run("rt throttling disabled", testFindingRTThrottlingDisabledRealKernel)
}

// testFindingAutogroupRealKernel runs under TestFindingSysctlsRealKernel's
// kernellock.
func testFindingAutogroupRealKernel(t *testing.T) {
	root := host.New("/")
	setSysctl(t, "kernel.sched_autogroup_enabled", "1")
	mustFind(t, findingsOf(root, Input{}), findings.FindingAutogroup, "kernel.sched_autogroup_enabled=1")

	enabled := v1alpha1.Enabled
	asked := Input{Tuning: v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{Autogroup: &enabled}}}
	mustNotFind(t, findingsOf(root, asked), findings.FindingAutogroup)

	setSysctl(t, "kernel.sched_autogroup_enabled", "0")
	mustNotFind(t, findingsOf(root, Input{}), findings.FindingAutogroup)
}

// startNamed runs a sleeping process whose comm is name, with env.
func startNamed(t *testing.T, name string, env ...string) *exec.Cmd {
	t.Helper()
	return startAt(t, filepath.Join(t.TempDir(), name), env...)
}

// startAt runs a copy of sleep installed at bin (unless one is there), with
// env.
func startAt(t *testing.T, bin string, env ...string) *exec.Cmd {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		privtest.Missing(t, "no sleep binary")
	}
	if _, err := os.Stat(bin); os.IsNotExist(err) {
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(sleep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "60")
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestFindingIRQBalanceRealProcess(t *testing.T) {
	privtest.Root(t)
	if out, _ := exec.Command("pgrep", "-x", "irqbalance").Output(); len(out) > 0 {
		privtest.Missing(t, "a real irqbalance runs here; the test needs to own every irqbalance process")
	}
	// The root's /usr/sbin/irqbalance is a copy of sleep: processes
	// running it are irqbalance; one merely named so is not.
	root := testroot.RealKernel(t)
	bin := root.Path("usr", "sbin", "irqbalance")
	in := Input{Tuning: tuning("1", "0")}

	impostor := startNamed(t, "irqbalance", "PATH=/usr/bin")
	waitComm(t, impostor.Process.Pid, "irqbalance")
	mustNotFind(t, findingsOf(root, in), findings.FindingIRQBalance)

	banned := startAt(t, bin, "IRQBALANCE_BANNED_CPULIST=1")
	waitComm(t, banned.Process.Pid, "irqbalance")
	mustNotFind(t, findingsOf(root, in), findings.FindingIRQBalance)

	unbanned := startAt(t, bin, "PATH=/usr/bin")
	waitComm(t, unbanned.Process.Pid, "irqbalance")
	mustFind(t, findingsOf(root, in), findings.FindingIRQBalance, "pid "+strconv.Itoa(unbanned.Process.Pid), "IRQBALANCE_BANNED_CPULIST=1")
}

func waitComm(t *testing.T, pid int, comm string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if strings.TrimSpace(string(b)) == comm {
			return
		}
		unix.Nanosleep(&unix.Timespec{Nsec: 5e6}, nil)
	}
	t.Fatalf("pid %d never showed comm %q", pid, comm)
}

func TestFindingRTTaskOnIsolatedCPURealKernel(t *testing.T) {
	privtest.Root(t)
	cmd := startNamed(t, "rt-sleeper")
	pid := cmd.Process.Pid
	var cpus unix.CPUSet
	cpus.Set(1)
	if err := unix.SchedSetaffinity(pid, &cpus); err != nil {
		t.Fatalf("pinning to CPU 1: %v", err)
	}
	attr := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}
	if err := unix.SchedSetAttr(pid, attr, 0); err != nil {
		t.Fatalf("making it SCHED_FIFO: %v", err)
	}
	root := host.New("/")
	mustFind(t, findingsOf(root, Input{Tuning: tuning("1", "0")}), findings.FindingRTTasksIsolated,
		"rt-sleeper (tid "+strconv.Itoa(pid)+", SCHED_FIFO prio 10, cpus 1)")
	if f := findType(findingsOf(root, Input{Tuning: tuning("0", "1")}), findings.FindingRTTasksIsolated); f != nil &&
		strings.Contains(f.Message, "tid "+strconv.Itoa(pid)) {
		t.Errorf("task pinned to CPU 1 reported on isolated CPU 0: %s", f.Message)
	}
}

// testFindingRTThrottlingDisabledRealKernel runs under
// TestFindingSysctlsRealKernel's kernellock.
func testFindingRTThrottlingDisabledRealKernel(t *testing.T) {
	setSysctl(t, "kernel.sched_rt_runtime_us", "-1")
	root := host.New("/")
	mustFind(t, findingsOf(root, Input{}), findings.FindingRTThrottlingOff, "sched_rt_runtime_us=-1")

	// With the isolated CPUs isolated by the kernel, -1 is a choice.
	isolated := testroot.Files(t, map[string]string{
		"proc/sys/kernel/sched_rt_runtime_us": "-1\n",
		"proc/cmdline":                        "ro isolcpus=managed_irq,domain,1 nohz_full=1 rcu_nocbs=1\n",
	})
	mustNotFind(t, findingsOf(isolated, Input{Tuning: tuning("1", "0")}), findings.FindingRTThrottlingOff)

	setSysctl(t, "kernel.sched_rt_runtime_us", "950000")
	mustNotFind(t, findingsOf(root, Input{}), findings.FindingRTThrottlingOff)
}
