//go:build privileged

package rtsched_test

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

const helperEnv = "LATENCYTIER_RT_HELPER"

// TestRTHelperProcess is not a test: it is the multi-threaded workload the
// tests below start (this test binary, re-executed). SIGUSR1 starts 4 more
// threads, SIGUSR2 ends the extra threads started so far.
func TestRTHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("the workload process of the real-time tests")
	}
	stop := make(chan struct{})
	spawn := func(n int) {
		for range n {
			ch := stop
			// A goroutine locked to its thread keeps that thread to
			// itself; when it returns still locked, the thread exits.
			go func() { runtime.LockOSThread(); <-ch }()
		}
	}
	spawn(2)
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	for s := range sig {
		if s == syscall.SIGUSR1 {
			spawn(4)
			continue
		}
		close(stop)
		stop = make(chan struct{})
	}
}

func tids(t *testing.T, pid int) []int {
	t.Helper()
	es, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range es {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// waitTids polls until cond holds for the helper's thread list (10 s).
func waitTids(t *testing.T, pid int, what string, cond func([]int) bool) []int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ts := tids(t, pid)
		if cond(ts) {
			return ts
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper %d: %s; threads %v", pid, what, ts)
		}
	}
}

type sched struct {
	policy   uint32
	prio     uint32
	nice     int32
	resetBit bool
}

func schedOf(t *testing.T, tid int) sched {
	t.Helper()
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		t.Fatalf("sched_getattr %d: %v", tid, err)
	}
	return sched{a.Policy, a.Priority, a.Nice, a.Flags&unix.SCHED_FLAG_RESET_ON_FORK != 0}
}

// rtPod is a kubelet-shaped pod (cgroupfs driver, v1 cpu and cpuset
// controllers, as kubelet makes them on a cgroup v1 node) whose cpu cgroups
// have rtRuntime µs of real-time budget each ("0": kubelet's default, no
// real-time task allowed) and whose cpuset cgroups allow cpus, running the
// helper process.
//
// The real-time budget is what lets the tests run FIFO threads in a pod
// cgroup on this host: its kernel has CONFIG_RT_GROUP_SCHED (cgroup v1 cpu
// controller with cpu.rt_runtime_us), where a task may become real-time
// only in a group with a budget, from kubepods down.
func rtPod(t *testing.T, rtRuntime string, cpus cpuset.CPUSet) (cgtest.Pod, podcgroup.Pod, int) {
	t.Helper()
	pod, _, p, pid := rtPodCpuset(t, rtRuntime, cpus)
	return pod, p, pid
}

// rtPodCpuset is rtPod that also returns the pod's cpuset cgroups.
func rtPodCpuset(t *testing.T, rtRuntime string, cpus cpuset.CPUSet) (cgtest.Pod, cgtest.Pod, podcgroup.Pod, int) {
	t.Helper()
	pod := cgtest.V1Pod(t, "cpu", podcgroup.DriverCgroupfs, "ltrt-", func(dir string) {
		cgtest.Set(t, filepath.Join(dir, "cpu.rt_runtime_us"), rtRuntime)
	})
	base := cgtest.V1Controller(t, "cpuset")
	mems := testroot.Read(t, filepath.Join(base, "cpuset.mems"))
	cs := pod.Mirror(t, "cpuset", func(dir string) {
		cgtest.Set(t, filepath.Join(dir, "cpuset.cpus"), cpus.String())
		cgtest.Set(t, filepath.Join(dir, "cpuset.mems"), mems)
	})
	t.Setenv(helperEnv, "1")
	pid := cgtest.StartIn(t, pod.CtrDir, os.Args[0], "-test.run=^TestRTHelperProcess$")
	cgtest.Move(t, cs.CtrDir, pid)
	waitTids(t, pid, "fewer than 4 threads", func(ts []int) bool { return len(ts) >= 4 })
	p := podcgroup.Pod{UID: pod.UID, Namespace: "rt", Name: "helper",
		ContainerIDs: []string{"containerd://" + podcgroup.ContainerID(pod.CtrDir)}}
	return pod, cs, p, pid
}

// onlineCPUs are this machine's online CPUs: a grant the helper's threads
// (allowed everywhere) stay within.
func onlineCPUs(t *testing.T) cpuset.CPUSet {
	t.Helper()
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	set, err := cpulist.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func knobs(t *testing.T, root *host.Root, pod cgtest.Pod, p podcgroup.Pod) ([]string, []v1alpha1.SettingResult) {
	t.Helper()
	ks, res, no, err := rtsched.Knobs(root, []rtsched.Grant{{Pod: p, Value: "fifo:10", CPUs: onlineCPUs(t)}}, podcgroup.WithKubepods(pod.Kubepods))
	if err != nil || len(no) > 0 {
		t.Fatalf("Knobs: %v, refusals %+v", err, no)
	}
	var ids []string
	for _, k := range ks {
		ids = append(ids, k.ID)
	}
	return ids, res
}

// stable waits until the helper's thread list holds still for 300 ms (the
// Go runtime starts threads of its own while it settles) and returns it.
func stable(t *testing.T, pid int) []int {
	t.Helper()
	last, since := tids(t, pid), time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Since(since) < 300*time.Millisecond; time.Sleep(20 * time.Millisecond) {
		if now := tids(t, pid); !slices.Equal(now, last) {
			last, since = now, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper %d never stopped starting threads: %v", pid, last)
		}
	}
	return last
}

// tidOf is the tid in a thread knob's ID (".../<tid>@<start>").
func tidOf(t *testing.T, id string) int {
	t.Helper()
	tail := id[strings.LastIndexByte(id, '/')+1:]
	n, err := strconv.Atoi(tail[:strings.IndexByte(tail, '@')])
	if err != nil {
		t.Fatalf("knob ID %q: %v", id, err)
	}
	return n
}

// TestRealFIFOApplyNewThreadsRevert gives every thread of a real
// multi-threaded process in a throwaway pod cgroup SCHED_FIFO 10 through the
// engine, checks the originals were journaled before the first change,
// picks up threads started later on the next pass, lets some threads exit,
// and reverts: every thread still alive is back at SCHED_OTHER with the
// nice value it had.
func TestRealFIFOApplyNewThreadsRevert(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	pod, p, pid := rtPod(t, "20000", onlineCPUs(t))
	first := stable(t, pid)
	for _, tid := range first {
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 5); err != nil {
			t.Fatal(err)
		}
	}
	eng := &apply.Engine{Root: root, Log: logr.Discard()}
	eng.Hook = func(stage apply.Stage, _ string) {
		if stage != apply.StageJournaled {
			return
		}
		j, err := journal.Load(root)
		if err != nil || j == nil {
			t.Fatalf("journal before the first change: %v", err)
		}
		for _, en := range j.Entries {
			if en.Original != "other:5" {
				t.Errorf("journaled original of %s = %q, want other:5", en.ID, en.Original)
			}
		}
		for _, tid := range first {
			if s := schedOf(t, tid); s.policy != unix.SCHED_NORMAL {
				t.Errorf("thread %d changed before the journal was written: %+v", tid, s)
			}
		}
	}
	t.Cleanup(func() { _, _ = eng.Revert() })
	// pass lists the threads and applies; it returns the tids tuned.
	pass := func() ([]int, apply.Report) {
		t.Helper()
		ks, res, no, err := rtsched.Knobs(root, []rtsched.Grant{{Pod: p, Value: "fifo:10", CPUs: onlineCPUs(t)}}, podcgroup.WithKubepods(pod.Kubepods))
		if err != nil || len(res) > 0 || len(no) > 0 {
			t.Fatalf("Knobs: %v, results %+v, refusals %+v", err, res, no)
		}
		rep, err := eng.Apply(apply.Meta{Profile: "rt"}, ks)
		if err != nil {
			t.Fatal(err)
		}
		var tuned []int
		for _, r := range rep.Results {
			tuned = append(tuned, tidOf(t, r.Setting))
			if r.State != v1alpha1.SettingApplied {
				t.Errorf("%s: %s %s", r.Setting, r.State, r.Message)
			}
		}
		if len(rep.Results) != len(ks) {
			t.Errorf("%d results for %d knobs", len(rep.Results), len(ks))
		}
		return tuned, rep
	}
	// check: every tuned thread is SCHED_FIFO 10 with reset-on-fork, every
	// other thread SCHED_OTHER (started after the listing; never an
	// inherited real-time copy).
	check := func(when string, tuned []int) {
		t.Helper()
		for _, tid := range tids(t, pid) {
			s := schedOf(t, tid)
			if slices.Contains(tuned, tid) && (s.policy != unix.SCHED_FIFO || s.prio != 10 || !s.resetBit) {
				t.Errorf("thread %d %s: %+v, want SCHED_FIFO 10 with reset-on-fork", tid, when, s)
			}
			if !slices.Contains(tuned, tid) && s.policy != unix.SCHED_NORMAL {
				t.Errorf("thread %d started after the listing, %s: %+v, want SCHED_OTHER", tid, when, s)
			}
		}
	}

	tuned, _ := pass()
	eng.Hook = nil
	for _, tid := range first {
		if !slices.Contains(tuned, tid) {
			t.Errorf("thread %d of the helper was not tuned (tuned %v)", tid, tuned)
		}
	}
	check("after the first pass", tuned)

	// New threads start as SCHED_OTHER (reset-on-fork), not as an
	// inherited copy the journal would take for an original, and the next
	// pass gives them the policy.
	before := tids(t, pid)
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// Four locked goroutines need four threads; the runtime may hand them
	// idle ones it had, but not all.
	waitTids(t, pid, "no new thread after SIGUSR1", func(ts []int) bool {
		return slices.ContainsFunc(ts, func(tid int) bool { return !slices.Contains(before, tid) })
	})
	now := stable(t, pid)
	check("before the second pass", tuned)
	tuned2, rep := pass()
	if fresh := len(tuned2) - len(tuned); rep.Written != fresh || fresh < 1 {
		t.Errorf("second pass wrote %d threads; %d were new (want at least 1)", rep.Written, fresh)
	}
	check("after the second pass", tuned2)

	// Threads that exit are no error: revert finds them gone. Every thread
	// alive goes back to SCHED_OTHER at its journaled nice value: 5 for
	// the first threads, 0 for those that started under reset-on-fork.
	j, err := journal.Load(root)
	if err != nil || j == nil {
		t.Fatalf("journal after apply: %v", err)
	}
	orig := map[int]string{}
	for _, en := range j.Entries {
		orig[tidOf(t, en.ID)] = en.Original
	}
	if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	waitTids(t, pid, "extra threads did not exit", func(ts []int) bool { return len(ts) < len(now) })
	// The first exit does not end the others: read the threads still alive
	// once the list holds still, or one may exit before it is checked below.
	alive := stable(t, pid)
	rep, err = eng.Revert()
	if err != nil {
		t.Fatal(err)
	}
	gone := 0
	for _, r := range rep.Results {
		if r.State != v1alpha1.SettingReverted {
			t.Errorf("revert %s: %s %s", r.Setting, r.State, r.Message)
		}
		if strings.HasPrefix(r.Message, "gone") {
			gone++
		}
	}
	t.Logf("reverted %d threads, %d of them gone", len(rep.Results), gone)
	if gone == 0 {
		t.Error("no thread reported gone after SIGUSR2 ended some")
	}
	for _, tid := range alive {
		s := schedOf(t, tid)
		if _, ok := orig[tid]; !ok {
			// Started after the second pass: never tuned.
			if s.policy != unix.SCHED_NORMAL {
				t.Errorf("untuned thread %d after revert: %+v", tid, s)
			}
			continue
		}
		want, err := rtsched.ParseValue(orig[tid])
		if err != nil || want.Policy != "other" || (slices.Contains(first, tid) && want.N != 5) {
			t.Errorf("thread %d journaled original %q", tid, orig[tid])
		}
		if s.policy != unix.SCHED_NORMAL || int(s.nice) != want.N || s.resetBit {
			t.Errorf("thread %d after revert: %+v, want %s", tid, s, orig[tid])
		}
	}
	if j, err := journal.Load(root); err != nil || j != nil {
		t.Errorf("journal after a complete revert: %+v, %v", j, err)
	}
}

// TestRealNoRTBudgetIsReported: with CONFIG_RT_GROUP_SCHED on cgroup v1 the
// kernel refuses real-time policy (EPERM) for a task in a cgroup whose
// cpu.rt_runtime_us is 0, which is how kubelet makes every pod cgroup. The
// agent reports that, with the reason, instead of failing on every thread.
//
// It holds the kernel lock: agent/apply's real-kernel tests write
// kernel.sched_rt_runtime_us, and while it is -1 the kernel lets the
// helper become real-time without a group budget.
func TestRealNoRTBudgetIsReported(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	pod, p, pid := rtPod(t, "0", onlineCPUs(t))
	if !root.Exists(filepath.Join(pod.CtrDir, "cpu.rt_runtime_us")) {
		t.Skip("no cpu.rt_runtime_us: the kernel has no CONFIG_RT_GROUP_SCHED")
	}
	err := unix.SchedSetAttr(pid, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 10}, 0)
	if !errors.Is(err, unix.EPERM) {
		t.Fatalf("sched_setattr FIFO in a cgroup without RT budget: %v, want EPERM", err)
	}
	ids, res := knobs(t, root, pod, p)
	if len(ids) != 0 || len(res) != 1 || res[0].State != v1alpha1.SettingFailed {
		t.Fatalf("knobs %v, results %+v; want one Failed result", ids, res)
	}
	if want := "cpu.rt_runtime_us is 0"; !strings.Contains(res[0].Message, want) {
		t.Errorf("message %q does not say %q", res[0].Message, want)
	}
	if s := schedOf(t, pid); s.policy != unix.SCHED_NORMAL {
		t.Errorf("helper changed: %+v", s)
	}
}
