//go:build privileged

package vmtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/schedext"
	"latencytier.io/latencytier/agent/tiersched"
	tbpf "latencytier.io/latencytier/agent/tiersched/bpf"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// The tier scheduler on a kernel with sched_ext (the 7.3 row): these tests
// load latencytier's own sched_ext scheduler into the guest's kernel.

// tierVM skips outside an ext row.
func tierVM(t *testing.T) *host.Root {
	t.Helper()
	root, row := vm(t)
	if !strings.Contains(row, "-ext-") {
		t.Skipf("row %s has no sched_ext; the tier scheduler runs only on the -ext- rows", row)
	}
	t.Cleanup(func() {
		// Whatever a test left: our pins only; a foreign scheduler is never ours to remove.
		_ = tbpf.Unpin(tiersched.PinDir(root))
		_ = tiersched.ClearExit(root)
	})
	return root
}

// kernelClass is what "byte-identical" compares after a revert: state,
// switch_all and the absence of root/. enable_seq grows with every enable
// by design and nr_rejected is reset at each enable, so those two are left
// out.
func kernelClass(t *testing.T, root *host.Root) string {
	t.Helper()
	dir := root.Sys("kernel", "sched_ext")
	_, err := os.Stat(root.Sys("kernel", "sched_ext", "root"))
	return fmt.Sprintf("state=%q switch_all=%q root/ absent=%v", read(t, root, dir+"/state"), read(t, root, dir+"/switch_all"), errors.Is(err, fs.ErrNotExist))
}

func enableSeq(t *testing.T, root *host.Root) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSpace(read(t, root, root.Sys("kernel", "sched_ext", "enable_seq"))), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func tierResult(t *testing.T, rep apply.Report) v1alpha1.SettingResult {
	t.Helper()
	for _, r := range rep.Results {
		if r.Setting == tiersched.SettingID {
			return r
		}
	}
	t.Fatalf("no %s result in %+v", tiersched.SettingID, rep.Results)
	return v1alpha1.SettingResult{}
}

// The class is reported fair, then ext with our ops name after an apply,
// the journal's original is fair, and a revert detaches and leaves the
// kernel's class files as they were.
func TestTierClassAppliesAndRevertsExactly(t *testing.T) {
	root := tierVM(t)
	before := kernelClass(t, root)
	if st := schedext.Read(root); st.Class() != schedext.ClassFair || st.State != schedext.StateDisabled {
		t.Fatalf("before: %+v, want fair (disabled)", st)
	}
	seq := enableSeq(t, root)
	e := engine(root)
	t.Cleanup(func() { _, _ = e.Revert() })
	rep, err := e.Apply(apply.Meta{Profile: "tier"}, []knob.Knob{tiersched.Knob(tiersched.Tier)})
	if err != nil {
		t.Fatal(err)
	}
	if r := tierResult(t, rep); r.State != v1alpha1.SettingApplied || r.Actual != tiersched.Tier {
		t.Fatalf("apply: %+v", r)
	}
	st := schedext.Read(root)
	if st.String() != "ext:latencytier" || !st.SwitchAll || st.EnableSeq != seq+1 {
		t.Errorf("after apply: %+v (%s), want ext:latencytier switching all, enable_seq %d", st, st, seq+1)
	}
	if !tbpf.Pinned(tiersched.PinDir(root)) {
		t.Error("the scheduler is not pinned")
	}
	// Another pass changes nothing: no reload.
	if _, err := e.Apply(apply.Meta{Profile: "tier"}, []knob.Knob{tiersched.Knob(tiersched.Tier)}); err != nil {
		t.Fatal(err)
	}
	if got := enableSeq(t, root); got != seq+1 {
		t.Errorf("a second pass reloaded: enable_seq %d, want %d", got, seq+1)
	}
	rev, err := e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rev.Results {
		if r.Setting == tiersched.SettingID && (r.State != v1alpha1.SettingReverted || r.Actual != tiersched.Fair) {
			t.Errorf("revert: %+v", r)
		}
	}
	if after := kernelClass(t, root); after != before {
		t.Errorf("kernel class after revert\n  %s\nwant\n  %s", after, before)
	}
	if _, err := os.Stat(tiersched.PinDir(root)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pins left after revert: %v", err)
	}
}

// helperEnv makes the test binary a workload (see init).
const helperEnv = "LATENCYTIER_TIER_HELPER"

// init runs the helper workload when the test binary is started as one:
// "waker <cpu>": one thread pinned to cpu that sleeps 5 ms and then spins
// 300 µs, forever; it writes its thread ID first.
func init() {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	cpu, _ := strconv.Atoi(os.Getenv(helperEnv + "_CPU"))
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(unix.Gettid())
	ts := unix.NsecToTimespec((5 * time.Millisecond).Nanoseconds())
	for {
		_ = unix.Nanosleep(&ts, nil)
		for end := time.Now().Add(300 * time.Microsecond); time.Now().Before(end); {
		}
	}
}

// proc is a started workload: its pid, and the thread to measure.
type proc struct {
	cmd      *exec.Cmd
	pid, tid int
}

func startWaker(t *testing.T, cpu int) proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(exe)
	c.Env = append(os.Environ(), helperEnv+"=waker", helperEnv+"_CPU="+strconv.Itoa(cpu))
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	buf := make([]byte, 32)
	n, err := out.Read(buf)
	if err != nil {
		t.Fatalf("waker: %v", err)
	}
	tid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("waker said %q", buf[:n])
	}
	return proc{cmd: c, pid: c.Process.Pid, tid: tid}
}

func startHog(t *testing.T, cpu int) proc {
	t.Helper()
	c := exec.Command("sh", "-c", "while :; do :; done")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(c.Process.Pid, &set); err != nil {
		t.Fatal(err)
	}
	return proc{cmd: c, pid: c.Process.Pid, tid: c.Process.Pid}
}

// schedstat is a thread's /proc/<pid>/task/<tid>/schedstat: time on CPU,
// time waiting on a run queue (both ns) and times run. The kernel keeps it
// in the core scheduler, the same for every class.
type schedstat struct{ run, wait, count int64 }

func readSchedstat(t *testing.T, root *host.Root, p proc) schedstat {
	t.Helper()
	f := strings.Fields(read(t, root, root.Proc(strconv.Itoa(p.pid), "task", strconv.Itoa(p.tid), "schedstat")))
	if len(f) != 3 {
		t.Fatalf("schedstat of %d: %v", p.tid, f)
	}
	var v [3]int64
	for i := range f {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		v[i] = n
	}
	return schedstat{v[0], v[1], v[2]}
}

func (s schedstat) minus(o schedstat) schedstat {
	return schedstat{s.run - o.run, s.wait - o.wait, s.count - o.count}
}

// avgWait is the mean run-queue wait per time run, in µs.
func (s schedstat) avgWait() float64 {
	if s.count == 0 {
		return 0
	}
	return float64(s.wait) / float64(s.count) / 1e3
}

// A granted task and an identical ungranted one share CPU 1 with a hog.
// The scheduler's counters show the granted task queued locally and
// preempting the hog; its mean run-queue wait is below the ungranted
// twin's (same work, same CPU, only the grant differs). Counters and
// ordering, not absolute latency: the row is emulated.
func TestTierRunsGrantedTasksFirst(t *testing.T) {
	root := tierVM(t)
	if runtime.NumCPU() < 2 {
		t.Fatalf("%d CPUs; the row gives the guest 2", runtime.NumCPU())
	}
	if err := tiersched.Write(root, tiersched.Tier, tbpf.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tiersched.Write(root, tiersched.Fair, tbpf.Options{}); err != nil {
			t.Errorf("unload: %v", err)
		}
	})
	m, err := tbpf.OpenMaps(tiersched.PinDir(root))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	startHog(t, 1)
	granted, twin := startWaker(t, 1), startWaker(t, 1)
	if err := m.SetGranted(nil, []uint32{uint32(granted.pid)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // settle
	c0, g0, w0 := counters(t, m), readSchedstat(t, root, granted), readSchedstat(t, root, twin)
	time.Sleep(5 * time.Second)
	c1, g1, w1 := counters(t, m), readSchedstat(t, root, granted), readSchedstat(t, root, twin)
	if st := schedext.Read(root); st.String() != "ext:latencytier" {
		t.Fatalf("the scheduler is gone mid-test: %s", st)
	}
	g, w := g1.minus(g0), w1.minus(w0)
	t.Logf("granted: ran %d times, mean wait %.0f µs; ungranted twin: ran %d times, mean wait %.0f µs", g.count, g.avgWait(), w.count, w.avgWait())
	t.Logf("counters: tier %d (preempting %d, demoted %d), fair %d, kthread %d, idle %d",
		c1.Tier-c0.Tier, c1.TierPreempt-c0.TierPreempt, c1.TierDemoted-c0.TierDemoted, c1.Fair-c0.Fair, c1.Kthread-c0.Kthread, c1.Idle-c0.Idle)
	if g.count == 0 || w.count == 0 {
		t.Fatalf("a waker never ran: granted %+v, twin %+v", g, w)
	}
	if got := c1.Tier - c0.Tier; got < uint64(g.count)/2 {
		t.Errorf("tier insertions %d for %d runs of the granted task: it was not queued as granted", got, g.count)
	}
	if c1.TierPreempt == c0.TierPreempt {
		t.Error("the granted task never preempted the hog")
	}
	if c1.Fair == c0.Fair {
		t.Error("no ordinary task went through the shared queue")
	}
	if g.avgWait() >= w.avgWait() {
		t.Errorf("granted mean wait %.0f µs is not below its ungranted twin's %.0f µs", g.avgWait(), w.avgWait())
	}
}

func counters(t *testing.T, m *tbpf.Maps) tbpf.Counters {
	t.Helper()
	c, err := m.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A stall forced through the test-only control: the scheduler drops every
// enqueue of a busy task, the kernel's watchdog ejects it after the
// 5 s timeout, the agent records the kernel's reason, and the next pass
// does not reload it (enable_seq unchanged). A revert then clears the
// marker and leaves the fair class.
func TestTierStallIsEjectedAndNotReloaded(t *testing.T) {
	root := tierVM(t)
	before := kernelClass(t, root)
	opts := tbpf.WithTestControls(tbpf.Options{Timeout: 5 * time.Second})
	if err := tiersched.Write(root, tiersched.Tier, opts); err != nil {
		t.Fatal(err)
	}
	seq := enableSeq(t, root)
	m, err := tbpf.OpenMaps(tiersched.PinDir(root))
	if err != nil {
		t.Fatal(err)
	}
	victim := startHog(t, 1)
	// A lone task on a CPU keeps running past its slice without being
	// queued again; a waker beside it makes the victim go through enqueue.
	startWaker(t, 1)
	if err := m.Stall(victim.pid); err != nil {
		t.Fatal(err)
	}
	m.Close()

	deadline := time.Now().Add(60 * time.Second)
	for schedext.Read(root).Class() != schedext.ClassFair {
		if time.Now().After(deadline) {
			t.Fatalf("not ejected after 60 s: %s", schedext.Read(root))
		}
		time.Sleep(100 * time.Millisecond)
	}
	ex, err := tiersched.Check(root, "rev-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ex == nil || ex.Kind != 1026 || ex.Reason != "runnable task stall" || !strings.Contains(ex.Msg, "failed to run for") {
		t.Fatalf("exit %+v, want SCX_EXIT_ERROR_STALL with the kernel's runnable task stall message", ex)
	}
	t.Logf("fallback: %s", ex.Message())
	if out, err := exec.Command("dmesg").CombinedOutput(); err == nil && !strings.Contains(string(out), `sched_ext: BPF scheduler "latencytier" disabled (runnable task stall)`) {
		t.Errorf("kernel log lacks the ejection line")
	}
	if _, err := os.Stat(tiersched.PinDir(root)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pins left after the ejection was recorded: %v", err)
	}

	// The next pass asks for the tier again: refused with the kernel's reason, not reloaded.
	e := engine(root)
	t.Cleanup(func() { _, _ = e.Revert() })
	rep, err := e.Apply(apply.Meta{Profile: "tier"}, []knob.Knob{tiersched.Knob(tiersched.Tier)})
	if err != nil {
		t.Fatal(err)
	}
	r := tierResult(t, rep)
	if r.State == v1alpha1.SettingApplied || !strings.Contains(r.Message, "kernel ejected latencytier: runnable task stall") {
		t.Errorf("pass after the ejection: %+v, want a refusal naming the stall", r)
	}
	if got := enableSeq(t, root); got != seq {
		t.Errorf("reloaded after the ejection: enable_seq %d, want %d", got, seq)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if err := tiersched.ClearExit(root); err != nil {
		t.Fatal(err)
	}
	if after := kernelClass(t, root); after != before {
		t.Errorf("kernel class after the ejection and revert\n  %s\nwant\n  %s", after, before)
	}
	_ = syscall.Kill(victim.pid, syscall.SIGKILL)
}
