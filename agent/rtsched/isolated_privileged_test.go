//go:build privileged

package rtsched_test

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

// TestRealRTPodOnSharedCPUsIsRefused: a granted pod gets its real-time
// policy only while every CPU each of its threads may run on is isolated.
// A real multi-threaded process allowed on every CPU is Refused (no knob,
// its threads stay SCHED_OTHER); pinned to the isolated CPU it is tuned;
// once one thread is allowed back on the shared CPU the pod is Refused
// again and the engine restores every thread's original policy.
func TestRealRTPodOnSharedCPUsIsRefused(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	online := onlineCPUs(t)
	if online.Size() < 2 {
		t.Fatalf("needs two online CPUs, has %s", online)
	}
	isolated := cpuset.New(online.List()[online.Size()-1])
	pod, p, pid := rtPod(t, "20000")
	grant := []rtsched.Grant{{Pod: p, Value: "fifo:10", CPUs: isolated}}
	render := func() ([]string, []rtsched.PodRefusal, func() apply.Report) {
		t.Helper()
		ks, res, no, err := rtsched.Knobs(root, grant, podcgroup.WithKubepods(pod.Kubepods))
		if err != nil || len(res) > 0 {
			t.Fatalf("Knobs: %v, results %+v", err, res)
		}
		var ids []string
		for _, k := range ks {
			ids = append(ids, k.ID)
		}
		return ids, no, func() apply.Report {
			t.Helper()
			eng := &apply.Engine{Root: root, Log: logr.Discard()}
			rep, err := eng.Apply(apply.Meta{Profile: "rt"}, ks)
			if err != nil {
				t.Fatal(err)
			}
			return rep
		}
	}
	t.Cleanup(func() { _, _ = (&apply.Engine{Root: root, Log: logr.Discard()}).Revert() })
	policies := func() map[int]uint32 {
		out := map[int]uint32{}
		for _, tid := range tids(t, pid) {
			out[tid] = schedOf(t, tid).policy
		}
		return out
	}

	all := stable(t, pid)
	ids, no, apply1 := render()
	if len(ids) != 0 || len(no) != 1 || no[0].Cause != rtsched.CauseCPUs || no[0].Result.State != v1alpha1.SettingRefused ||
		!strings.Contains(no[0].Result.Message, "cpus.isolated") {
		t.Fatalf("threads allowed on %s: knobs %v, refusals %+v; want the pod Refused by %s", online, ids, no, rtsched.CauseCPUs)
	}
	apply1()
	for tid, pol := range policies() {
		if pol != unix.SCHED_NORMAL {
			t.Errorf("thread %d of a refused pod has policy %d", tid, pol)
		}
	}

	var pin unix.CPUSet
	pin.Set(isolated.List()[0])
	for _, tid := range all {
		if err := unix.SchedSetaffinity(tid, &pin); err != nil {
			t.Fatal(err)
		}
	}
	all = stable(t, pid)
	ids, no, apply2 := render()
	if len(no) != 0 || len(ids) != len(all) {
		t.Fatalf("threads pinned to %s: knobs %v for threads %v, refusals %+v", isolated, ids, all, no)
	}
	apply2()
	for tid, pol := range policies() {
		if pol != unix.SCHED_FIFO {
			t.Errorf("pinned thread %d has policy %d, want SCHED_FIFO", tid, pol)
		}
	}

	var wide unix.CPUSet
	for _, c := range online.List() {
		wide.Set(c)
	}
	if err := unix.SchedSetaffinity(all[len(all)-1], &wide); err != nil {
		t.Fatal(err)
	}
	ids, no, apply3 := render()
	if len(ids) != 0 || len(no) != 1 || no[0].Cause != rtsched.CauseCPUs {
		t.Fatalf("one thread allowed on %s again: knobs %v, refusals %+v", online, ids, no)
	}
	rep := apply3()
	if len(rep.Restored) != len(all) {
		t.Errorf("restored %d threads, want %d: %+v", len(rep.Restored), len(all), rep.Restored)
	}
	for tid, pol := range policies() {
		if pol != unix.SCHED_NORMAL {
			t.Errorf("thread %d of a pod refused again has policy %d, want SCHED_OTHER", tid, pol)
		}
	}
}
