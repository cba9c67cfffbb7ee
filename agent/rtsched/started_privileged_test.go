//go:build privileged

package rtsched_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/internal/nritest"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/nri"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

// rtCreateGrants grant namespace rt quota removal, isolated CPUs 2-3 and
// realtime, as the loop publishes them to the NRI plugin. The plugin
// decides from them alone (the real cgroup's CPUs are the file path's
// business); RTRefused is empty, as on a kernel without RT group
// scheduling.
func rtCreateGrants(realtime bool) *nri.Grants {
	sel := &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{"tier": "latency"}}
	g := &nri.Grants{Tuning: v1alpha1.TuningSpec{
		CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove, NamespaceSelector: sel},
		CPUs:     &v1alpha1.CPUSpec{Reserved: ptr.To("0-1"), Isolated: ptr.To("2-3"), NamespaceSelector: sel},
	}, Namespaces: map[string]map[string]string{"rt": {"tier": "latency"}}, Online: "0-3"}
	if realtime {
		g.Tuning.Realtime = &v1alpha1.RealtimeSpec{NamespaceSelector: sel}
	}
	return g
}

// setSched sets tid's policy as an OCI runtime applies process.scheduler
// (or as another writer would), and puts it back to SCHED_OTHER at nice 0
// when the test ends.
func setSched(t *testing.T, tid int, a *unix.SchedAttr) {
	t.Helper()
	t.Cleanup(func() {
		err := unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: unix.SCHED_NORMAL}, 0)
		if err != nil && !errors.Is(err, unix.ESRCH) {
			t.Errorf("restoring thread %d to SCHED_OTHER: %v", tid, err)
		}
	})
	if err := unix.SchedSetAttr(tid, a, 0); err != nil {
		t.Fatalf("sched_setattr %d: %v", tid, err)
	}
}

// TestRealStartedRealtimeIsRestoredWhenGrantGoes: the NRI plugin gives a
// granted pod's container SCHED_FIFO at CreateContainer, the OCI runtime
// (here the test) applies it to the container's first thread, and the
// grant is withdrawn before any pass of the agent's file path saw the
// container. The node restores what it set: the agent's next pass puts
// that thread back to SCHED_OTHER at nice 0. A thread of the same process
// that someone else made real-time is left as it is (never fight another
// writer).
func TestRealStartedRealtimeIsRestoredWhenGrantGoes(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	cg, p, pid := rtPod(t, "20000", onlineCPUs(t))
	eng := &apply.Engine{Root: root, Log: logr.Discard()}
	t.Cleanup(func() { _, _ = eng.Revert() })

	rt := nritest.Start(t)
	plugin := nri.New(rt.Socket, logr.Discard(), nri.WithRealtimeJournal(func(pod podcgroup.Pod, pid int, v rtsched.Value) error {
		return rtsched.JournalStarted(root, eng.Adopt, pod, pid, v)
	}))
	plugin.Publish(rtCreateGrants(true))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- plugin.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if !eventually(func() bool { return plugin.State().Reason == v1alpha1.ReasonHookConnected }) {
		t.Fatalf("the plugin did not connect: %+v", plugin.State())
	}

	sandbox := &api.PodSandbox{Id: "sandbox-rt", Uid: p.UID, Namespace: p.Namespace, Name: p.Name,
		Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable, v1alpha1.SchedPolicyAnnotation: "fifo:10"}}
	ctr := &api.Container{Id: podcgroup.ContainerID(cg.CtrDir), Name: "app", Linux: &api.LinuxContainer{
		Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(100000), Period: api.UInt64(100000)}}}}
	s := rt.Create(t, sandbox, ctr).GetLinux().GetScheduler()
	if s == nil || s.Policy != api.LinuxSchedulerPolicy_SCHED_FIFO || s.Priority != 10 {
		t.Fatalf("scheduler adjustment %v, want SCHED_FIFO 10", s)
	}
	// The OCI runtime starts the container's first thread so.
	setSched(t, pid, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: uint32(s.Priority), Flags: unix.SCHED_FLAG_RESET_ON_FORK})
	ctr.Pid = uint32(pid)
	rt.Start(t, sandbox, ctr)
	// Another writer makes a second thread of the process real-time.
	other := slices.DeleteFunc(stable(t, pid), func(tid int) bool { return tid == pid })[0]
	setSched(t, other, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 10})
	// The plugin journals it at StartContainer, in the background when a
	// pass holds the journal longer than its bound.
	if !eventually(func() bool {
		j, err := journal.Load(root)
		return err == nil && j != nil && len(j.Entries) == 1
	}) {
		t.Error("the thread the plugin started real-time was never journaled")
	}

	// The grant goes before any pass of the file path saw the container:
	// the pass renders no knob for the pod.
	plugin.Publish(rtCreateGrants(false))
	ks, res, no, err := rtsched.Knobs(root, nil)
	if err != nil || len(ks)+len(res)+len(no) > 0 {
		t.Fatalf("Knobs without a grant: %v %v %v %v", ks, res, no, err)
	}
	rep, err := eng.Apply(apply.Meta{Profile: "rt"}, ks)
	if err != nil {
		t.Fatal(err)
	}
	if got := schedOf(t, pid); got.policy != unix.SCHED_NORMAL || got.nice != 0 {
		t.Errorf("the thread the plugin started real-time is %+v after its grant went, want SCHED_OTHER at nice 0 (restored: %+v)", got, rep.Restored)
	}
	if len(rep.Restored) != 1 || rep.Restored[0].State != v1alpha1.SettingReverted || tidOf(t, rep.Restored[0].Setting) != pid {
		t.Errorf("restored %+v, want thread %d Reverted", rep.Restored, pid)
	}
	if got := schedOf(t, other); got.policy != unix.SCHED_FIFO || got.prio != 10 {
		t.Errorf("thread %d that another writer made real-time is %+v, want it left SCHED_FIFO 10", other, got)
	}
	if rep.HeldThreads != 0 {
		t.Errorf("%d threads still held after the restore, want 0", rep.HeldThreads)
	}
}

// eventually polls cond until it holds, 10 s at most.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// TestRealStartedUnjournaledIsPutBack: a thread the plugin started
// real-time that the journal cannot take is put back to SCHED_OTHER at
// once (never a policy the node could not restore later); one that does
// not run the policy asked for is not the agent's and is left.
func TestRealStartedUnjournaledIsPutBack(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	_, p, pid := rtPod(t, "20000", onlineCPUs(t))
	fifo10 := rtsched.Value{Policy: "fifo", N: 10}
	setSched(t, pid, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 10, Flags: unix.SCHED_FLAG_RESET_ON_FORK})

	full := func(journal.Entry) error { return errors.New("no space left on device") }
	if err := rtsched.JournalStarted(root, full, p, pid, rtsched.Value{Policy: "fifo", N: 20}); err == nil {
		t.Error("a thread at fifo:10 was taken for one started at fifo:20")
	}
	if got := schedOf(t, pid); got.policy != unix.SCHED_FIFO || got.prio != 10 {
		t.Errorf("a thread not at the asked policy was changed: %+v", got)
	}
	if err := rtsched.JournalStarted(root, full, p, pid, fifo10); err == nil {
		t.Error("JournalStarted reported no error when the journal refused the entry")
	}
	if got := schedOf(t, pid); got.policy != unix.SCHED_NORMAL || got.nice != 0 {
		t.Errorf("unjournaled thread is %+v, want put back to SCHED_OTHER at nice 0", got)
	}
}
