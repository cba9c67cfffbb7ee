//go:build privileged

package rtsched_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

// rtPass renders one pass of a pod's real-time grant on the real host: the
// knob IDs, the refusals, and a function that applies the knobs.
type rtPass struct {
	t     *testing.T
	root  *host.Root
	pod   cgtest.Pod
	grant []rtsched.Grant
}

func (r rtPass) render() ([]string, []rtsched.PodRefusal, func() apply.Report) {
	r.t.Helper()
	ks, res, no, err := rtsched.Knobs(r.root, r.grant, podcgroup.WithKubepods(r.pod.Kubepods))
	if err != nil || len(res) > 0 {
		r.t.Fatalf("Knobs: %v, results %+v", err, res)
	}
	var ids []string
	for _, k := range ks {
		ids = append(ids, k.ID)
	}
	return ids, no, func() apply.Report {
		r.t.Helper()
		rep, err := (&apply.Engine{Root: r.root, Log: logr.Discard()}).Apply(apply.Meta{Profile: "rt"}, ks)
		if err != nil {
			r.t.Fatal(err)
		}
		return rep
	}
}

// isolatedCPU is the last online CPU, the tests' isolated set; the others
// are the shared CPUs.
func isolatedCPU(t *testing.T) (online, isolated cpuset.CPUSet) {
	t.Helper()
	online = onlineCPUs(t)
	if online.Size() < 2 {
		t.Fatalf("needs two online CPUs, has %s", online)
	}
	return online, cpuset.New(online.List()[online.Size()-1])
}

func setAffinity(t *testing.T, tid int, cpus cpuset.CPUSet) error {
	t.Helper()
	var set unix.CPUSet
	for _, c := range cpus.List() {
		set.Set(c)
	}
	return unix.SchedSetaffinity(tid, &set)
}

// allowedOf is a thread's Cpus_allowed_list: where the kernel lets it run.
func allowedOf(t *testing.T, tid int) cpuset.CPUSet {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(tid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			set, err := cpulist.Parse(v)
			if err != nil {
				t.Fatal(err)
			}
			return set
		}
	}
	t.Fatalf("/proc/%d/status has no Cpus_allowed_list", tid)
	return cpuset.New()
}

// TestRealNarrowedThreadInAWideCgroupIsRefused: a real multi-threaded
// process whose cgroup cpuset spans every CPU narrows every thread's own
// affinity onto the isolated CPU and asks for real-time: it is Refused (no
// knob, its threads stay SCHED_OTHER), because it could widen its affinity
// back onto the shared CPUs the moment after the grant. Before the grant
// was judged on the cgroup cpuset, these threads got SCHED_FIFO.
func TestRealNarrowedThreadInAWideCgroupIsRefused(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	online, isolated := isolatedCPU(t)
	pod, p, pid := rtPod(t, "20000", online)
	pass := rtPass{t: t, root: root, pod: pod, grant: []rtsched.Grant{{Pod: p, Value: "fifo:10", CPUs: isolated}}}
	t.Cleanup(func() { _, _ = (&apply.Engine{Root: root, Log: logr.Discard()}).Revert() })

	for _, tid := range stable(t, pid) {
		if err := setAffinity(t, tid, isolated); err != nil {
			t.Fatal(err)
		}
	}
	all := stable(t, pid)
	for _, tid := range all {
		if got := allowedOf(t, tid); !got.Equals(isolated) {
			t.Fatalf("thread %d allowed on %s after narrowing to %s", tid, got, isolated)
		}
	}
	ids, no, apply1 := pass.render()
	if len(ids) != 0 || len(no) != 1 || no[0].Cause != rtsched.CauseCPUs || no[0].Result.State != v1alpha1.SettingRefused ||
		!strings.Contains(no[0].Result.Message, "cgroup lets its threads run on CPUs \""+online.String()+"\"") {
		t.Fatalf("threads narrowed to %s in a cgroup on %s: knobs %v, refusals %+v; want the pod Refused by its cgroup cpuset", isolated, online, ids, no)
	}
	apply1()
	for _, tid := range tids(t, pid) {
		if s := schedOf(t, tid); s.policy != unix.SCHED_NORMAL {
			t.Errorf("thread %d of a refused pod has policy %d", tid, s.policy)
		}
	}
}

// TestRealGrantedThreadCannotWidenOutOfIsolated: in a cgroup whose cpuset
// is the isolated CPU, the pod is granted and its threads run SCHED_FIFO.
// A thread that then widens its affinity onto a shared CPU (sched_setaffinity,
// here made by root, which can do no more than the thread itself) stays
// where its cgroup lets it: the kernel clamps the affinity to the cpuset, a
// shared CPU alone is refused (EINVAL), and the next pass keeps the grant.
// Once the cgroup's cpuset itself is widened (an administrator, kubelet),
// the next pass refuses the pod and the engine restores every thread's
// original policy.
func TestRealGrantedThreadCannotWidenOutOfIsolated(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	online, isolated := isolatedCPU(t)
	shared := online.Difference(isolated)
	pod, cs, p, pid := rtPodCpuset(t, "20000", isolated)
	pass := rtPass{t: t, root: root, pod: pod, grant: []rtsched.Grant{{Pod: p, Value: "fifo:10", CPUs: isolated}}}
	t.Cleanup(func() { _, _ = (&apply.Engine{Root: root, Log: logr.Discard()}).Revert() })

	all := stable(t, pid)
	ids, no, apply1 := pass.render()
	if len(no) != 0 || len(ids) != len(all) {
		t.Fatalf("threads in a cgroup on %s: knobs %v for threads %v, refusals %+v", isolated, ids, all, no)
	}
	apply1()

	for _, tid := range all {
		if err := setAffinity(t, tid, online); err != nil {
			t.Fatalf("widening thread %d onto %s: %v", tid, online, err)
		}
		if err := setAffinity(t, tid, shared); !errors.Is(err, unix.EINVAL) {
			t.Errorf("moving thread %d onto the shared CPUs %s alone: %v, want EINVAL", tid, shared, err)
		}
	}
	for _, tid := range all {
		s, got := schedOf(t, tid), allowedOf(t, tid)
		if s.policy != unix.SCHED_FIFO {
			t.Errorf("granted thread %d has policy %d, want SCHED_FIFO", tid, s.policy)
		}
		if !got.IsSubsetOf(isolated) {
			t.Errorf("SCHED_FIFO thread %d may run on %s after widening its affinity, outside the isolated %s", tid, got, isolated)
		}
	}
	ids, no, apply2 := pass.render()
	if len(no) != 0 || len(ids) != len(all) {
		t.Fatalf("after the threads tried to widen: knobs %v, refusals %+v; want the grant kept", ids, no)
	}
	if rep := apply2(); rep.Written != 0 || len(rep.Restored) != 0 {
		t.Errorf("second pass wrote %d, restored %+v; want nothing", rep.Written, rep.Restored)
	}

	// The cgroup's cpuset widened, top down (a v1 child's cpus stay within
	// its parent's).
	for _, dir := range []string{cs.KubepodsDir, filepath.Dir(cs.Dir), cs.Dir, cs.CtrDir} {
		cgtest.Set(t, filepath.Join(dir, "cpuset.cpus"), online.String())
	}
	ids, no, apply3 := pass.render()
	if len(ids) != 0 || len(no) != 1 || no[0].Cause != rtsched.CauseCPUs {
		t.Fatalf("cgroup widened to %s: knobs %v, refusals %+v; want the pod Refused", online, ids, no)
	}
	if rep := apply3(); len(rep.Restored) != len(all) {
		t.Errorf("restored %d threads, want %d: %+v", len(rep.Restored), len(all), rep.Restored)
	}
	for _, tid := range tids(t, pid) {
		if s := schedOf(t, tid); s.policy != unix.SCHED_NORMAL {
			t.Errorf("thread %d of a pod refused again has policy %d, want SCHED_OTHER", tid, s.policy)
		}
	}
}
