package nri_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/internal/nritest"
	"latencytier.io/latencytier/agent/nri"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// rtGrants is grants() with realtime granted to the same namespaces
// (default policies FIFO and RR, default maxPriority 40).
func rtGrants() *nri.Grants {
	g := grants()
	g.Tuning.Realtime = &v1alpha1.RealtimeSpec{NamespaceSelector: g.Tuning.CPUs.NamespaceSelector}
	return g
}

// rtPod is a pod of ns that asks for quota removal (and so the isolated
// CPUs) and for the real-time policy ask.
func rtPod(ns, ask string) *api.PodSandbox {
	return pod(ns, map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable, v1alpha1.SchedPolicyAnnotation: ask})
}

func sched(a *api.ContainerAdjustment) *api.LinuxScheduler { return a.GetLinux().GetScheduler() }

func wantSched(t *testing.T, a *api.ContainerAdjustment, policy api.LinuxSchedulerPolicy, prio int32) {
	t.Helper()
	s := sched(a)
	if s == nil {
		t.Fatalf("no scheduler adjustment, want %s %d", policy, prio)
	}
	if s.Policy != policy || s.Priority != prio || s.Nice != 0 ||
		len(s.Flags) != 1 || s.Flags[0] != api.LinuxSchedulerFlag_SCHED_FLAG_RESET_ON_FORK {
		t.Errorf("scheduler adjustment %v, want %s priority %d with SCHED_FLAG_RESET_ON_FORK only", s, policy, prio)
	}
}

// TestCreateContainerRealtime: a pod granted realtime by the profile
// starts with its policy, by the file path's rules; every other pod gets
// none.
func TestCreateContainerRealtime(t *testing.T) {
	rt := startRuntime(t)
	p := nri.New(rt.socket, logr.Discard(), (&rtJournal{}).opt())
	p.Publish(rtGrants())
	startPlugin(t, p)
	if m := p.State().Message; !strings.Contains(m, "real-time policy at creation: set through NRI") {
		t.Errorf("Connected message %q does not say the runtime takes the real-time policy", m)
	}
	for _, tc := range []struct {
		name   string
		pod    *api.PodSandbox
		cpus   string
		policy api.LinuxSchedulerPolicy // SCHED_NONE: no adjustment
		prio   int32
	}{
		{name: "granted fifo, placed on the isolated CPUs", pod: rtPod("trading", "fifo:30"), policy: api.LinuxSchedulerPolicy_SCHED_FIFO, prio: 30},
		{name: "granted rr", pod: rtPod("trading", "rr:7"), policy: api.LinuxSchedulerPolicy_SCHED_RR, prio: 7},
		{name: "granted, another owner placed it within the isolated CPUs", pod: rtPod("trading", "fifo:30"), cpus: "3", policy: api.LinuxSchedulerPolicy_SCHED_FIFO, prio: 30},
		// A real-time thread on a shared CPU starves kubelet there.
		{name: "granted, another owner placed it on a shared CPU", pod: rtPod("trading", "fifo:30"), cpus: "1-2"},
		// Not on the isolated CPUs (it does not ask for them): refused.
		{name: "granted namespace, not placed", pod: pod("trading", map[string]string{v1alpha1.SchedPolicyAnnotation: "fifo:30"})},
		{name: "namespace not granted", pod: rtPod("web", "fifo:30")},
		{name: "namespace unknown", pod: rtPod("elsewhere", "fifo:30")},
		{name: "above maxPriority", pod: rtPod("trading", "fifo:41")},
		{name: "malformed", pod: rtPod("trading", "fifo:030")},
		{name: "not real-time", pod: rtPod("trading", "other:0")},
		{name: "no ask", pod: pod("trading", optIn)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := create(t, rt, tc.pod, ctr("c-rt", tc.cpus))
			if tc.policy == api.LinuxSchedulerPolicy_SCHED_NONE {
				if s := sched(a); s != nil {
					t.Errorf("scheduler adjusted to %v, want none", s)
				}
				return
			}
			wantSched(t, a, tc.policy, tc.prio)
		})
	}
}

// TestCreateContainerRealtimeFollowsProfile: the policies and priority the
// profile allows, and a profile without realtime.
func TestCreateContainerRealtimeFollowsProfile(t *testing.T) {
	rt := startRuntime(t)
	p := nri.New(rt.socket, logr.Discard(), (&rtJournal{}).opt())
	startPlugin(t, p)

	g := rtGrants()
	g.Tuning.Realtime.Policies = []v1alpha1.RealtimePolicy{v1alpha1.RealtimeRR}
	g.Tuning.Realtime.MaxPriority = 60 // held at 49, below the IRQ threads
	p.Publish(g)
	if s := sched(create(t, rt, rtPod("trading", "fifo:10"), ctr("c1", ""))); s != nil {
		t.Errorf("FIFO outside realtime.policies: scheduler %v, want none", s)
	}
	wantSched(t, create(t, rt, rtPod("trading", "rr:49"), ctr("c2", "")), api.LinuxSchedulerPolicy_SCHED_RR, 49)
	if s := sched(create(t, rt, rtPod("trading", "rr:50"), ctr("c3", ""))); s != nil {
		t.Errorf("priority above the IRQ threads: scheduler %v, want none", s)
	}

	// The isolated CPUs are granted, realtime is not.
	g = rtGrants()
	g.Tuning.Realtime.NamespaceSelector = &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{"realtime": "yes"}}
	p.Publish(g)
	a := create(t, rt, rtPod("trading", "fifo:10"), ctr("c5", ""))
	if s := sched(a); s != nil || cpus(a) != "2-3" {
		t.Errorf("namespace not granted by realtime.namespaceSelector: scheduler %v cpuset %q, want none and 2-3", s, cpus(a))
	}

	// cpus.isolated reaches a CPU that is not online: spec.cpus is
	// Invalid on the node, and the file path refuses realtime.
	g = rtGrants()
	g.Online = "0-2"
	p.Publish(g)
	if s := sched(create(t, rt, rtPod("trading", "fifo:10"), ctr("c6", ""))); s != nil {
		t.Errorf("isolated CPUs not online: scheduler %v, want none", s)
	}

	g = rtGrants()
	g.Tuning.Realtime = nil
	p.Publish(g)
	if s := sched(create(t, rt, rtPod("trading", "fifo:10"), ctr("c4", ""))); s != nil {
		t.Errorf("no realtime in the profile: scheduler %v, want none", s)
	}
}

// TestCreateContainerRealtimeKernelRefuses: where the kernel could refuse
// the policy at start (RT group scheduling), the container would not start:
// no policy, the rest still adjusted.
func TestCreateContainerRealtimeKernelRefuses(t *testing.T) {
	rt := startRuntime(t)
	p := nri.New(rt.socket, logr.Discard(), (&rtJournal{}).opt())
	g := rtGrants()
	g.RTRefused = "the kernel schedules real-time tasks by group"
	p.Publish(g)
	startPlugin(t, p)
	if m := p.State().Message; !strings.Contains(m, "real-time policy at creation: not set on this node (the kernel schedules real-time tasks by group)") {
		t.Errorf("Connected message %q does not say this node refuses the real-time policy at creation, and why", m)
	}
	a := create(t, rt, rtPod("trading", "fifo:30"), ctr("c-rt", ""))
	if s := sched(a); s != nil {
		t.Errorf("scheduler adjusted to %v where the kernel could refuse it, want none", s)
	}
	// The grants of a later pass say the node takes it after all.
	p.Publish(rtGrants())
	if m := p.State().Message; !strings.Contains(m, "real-time policy at creation: set through NRI") {
		t.Errorf("Connected message %q after the refusal went, want it set through NRI", m)
	}
	if cpus(a) != "2-3" {
		t.Errorf("cpuset %q, want 2-3 still", cpus(a))
	}
}

// TestCreateContainerRealtimeFallback: a runtime on an NRI without
// process.scheduler (or one that does not say) gets no policy, and the
// node's condition says the file path sets it.
func TestCreateContainerRealtimeFallback(t *testing.T) {
	for _, v := range []string{"", "v0.10.1"} {
		t.Run("nri "+v, func(t *testing.T) {
			rt := startRuntime(t)
			p := nri.New(rt.socket, logr.Discard(), (&rtJournal{}).opt(), nri.WithNRIVersion(v))
			p.Publish(rtGrants())
			startPlugin(t, p)
			if m := p.State().Message; !strings.Contains(m, "real-time policy at creation: not set through NRI") ||
				!strings.Contains(m, "the file path sets it") {
				t.Errorf("Connected message %q does not say the file path sets the real-time policy", m)
			}
			a := create(t, rt, rtPod("trading", "fifo:30"), ctr("c-rt", ""))
			if s := sched(a); s != nil {
				t.Errorf("scheduler adjusted to %v on a runtime without it, want none", s)
			}
			if q := quota(a); q == nil || cpus(a) != "2-3" {
				t.Errorf("quota %v cpuset %q, want the rest adjusted", q, cpus(a))
			}
		})
	}
}

func TestSchedulerSupport(t *testing.T) {
	for v, want := range map[string]bool{
		"v0.12.5": true, "v0.11.0": true, "0.11": true, "v1.0.0": true, "v0.13.0-rc.1": true,
		"0.0.0-unknown": true, "(devel)": true, "unknown": true,
		"v0.10.9": false, "v0.8.0": false, "": false,
	} {
		if got, msg := nri.SchedulerSupport(v); got != want || msg == "" {
			t.Errorf("schedulerSupport(%q) = %v %q, want %v", v, got, msg, want)
		}
	}
}

// scheduler is a plugin that gives every container SCHED_RR 5, as a
// resource policy that sets scheduling parameters does.
type otherScheduler struct{}

func (otherScheduler) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	a := &api.ContainerAdjustment{}
	a.SetLinuxScheduler(&api.LinuxScheduler{Policy: api.LinuxSchedulerPolicy_SCHED_RR, Priority: 5})
	return a, nil, nil
}

// TestCreateContainerLeavesOthersScheduler: a policy another plugin set
// before ours is theirs. The runtime gives a field one owner and fails the
// container's creation when a second plugin sets it: the plugin must leave
// it, and the container starts with the other's.
func TestCreateContainerLeavesOthersScheduler(t *testing.T) {
	rt := startRuntime(t)
	s, err := stub.New(otherScheduler{}, stub.WithPluginName("scheduler"), stub.WithPluginIdx("10"), stub.WithSocketPath(rt.socket))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Stop(); s.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for sched(create(t, rt, pod("probe", nil), ctr("probe", ""))) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the other plugin did not register")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p := nri.New(rt.socket, logr.Discard(), (&rtJournal{}).opt())
	p.Publish(rtGrants())
	startPlugin(t, p)
	a := create(t, rt, rtPod("trading", "fifo:30"), ctr("c-rt", ""))
	if s := sched(a); s == nil || s.Policy != api.LinuxSchedulerPolicy_SCHED_RR || s.Priority != 5 {
		t.Errorf("scheduler %v, want the other plugin's SCHED_RR 5", s)
	}
	if cpus(a) != "2-3" {
		t.Errorf("cpuset %q, want 2-3 still", cpus(a))
	}
}

// rtJournal is the plugin's real-time journal (nri.JournalFunc) as a
// record of what it was asked to journal; err fails every call, and hold,
// when set, holds every call until it is closed.
type rtJournal struct {
	mu   sync.Mutex
	got  []journaled
	err  error
	hold chan struct{}
}

type journaled struct {
	pod podcgroup.Pod
	pid int
	v   string
}

func (j *rtJournal) opt() nri.Option { return nri.WithRealtimeJournal(j.journal) }

func (j *rtJournal) journal(pod podcgroup.Pod, pid int, v rtsched.Value) error {
	if j.hold != nil {
		<-j.hold
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.got = append(j.got, journaled{pod, pid, v.String()})
	return j.err
}

func (j *rtJournal) calls() []journaled {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]journaled(nil), j.got...)
}

// TestCreateContainerRealtimeNeedsJournal: a plugin that cannot journal
// the threads it starts real-time sets no policy (the node restores what it
// set); the rest of the adjustment stands.
func TestCreateContainerRealtimeNeedsJournal(t *testing.T) {
	rt := startRuntime(t)
	p := nri.New(rt.socket, logr.Discard())
	p.Publish(rtGrants())
	startPlugin(t, p)
	if m := p.State().Message; !strings.Contains(m, "real-time policy at creation: not set through NRI (the plugin has no journal") {
		t.Errorf("Connected message %q does not say the plugin sets no real-time policy", m)
	}
	a := create(t, rt, rtPod("trading", "fifo:30"), ctr("c-rt", ""))
	if s := sched(a); s != nil {
		t.Errorf("scheduler adjusted to %v without a journal for it, want none", s)
	}
	if cpus(a) != "2-3" {
		t.Errorf("cpuset %q, want 2-3 still", cpus(a))
	}
}

// TestStartContainerJournalsRealtime: the container the plugin started
// real-time is journaled at StartContainer with its pid and policy, once;
// a container given none, or removed before it started, is not.
func TestStartContainerJournalsRealtime(t *testing.T) {
	rt := startRuntime(t)
	j := &rtJournal{}
	p := nri.New(rt.socket, logr.Discard(), j.opt())
	p.Publish(rtGrants())
	startPlugin(t, p)
	nrt := &nritest.Runtime{R: rt.r, Socket: rt.socket}

	granted, web := rtPod("trading", "fifo:30"), rtPod("web", "fifo:30")
	cRT, cWeb, cGone := ctr("c-rt", ""), ctr("c-web", ""), ctr("c-gone", "")
	wantSched(t, create(t, rt, granted, cRT), api.LinuxSchedulerPolicy_SCHED_FIFO, 30)
	if s := sched(create(t, rt, web, cWeb)); s != nil {
		t.Fatalf("namespace not granted: scheduler %v", s)
	}
	wantSched(t, create(t, rt, granted, cGone), api.LinuxSchedulerPolicy_SCHED_FIFO, 30)
	nrt.Remove(t, granted, cGone)

	cRT.Pid, cWeb.Pid, cGone.Pid = 4242, 4343, 4444
	nrt.Start(t, granted, cRT)
	nrt.Start(t, web, cWeb)
	nrt.Start(t, granted, cGone)
	nrt.Start(t, granted, cRT) // once
	want := []journaled{{podcgroup.Pod{UID: "uid-trading", Namespace: "trading", Name: "app"}, 4242, "fifo:30"}}
	if got := j.calls(); len(got) != 1 || got[0].pod.UID != want[0].pod.UID || got[0].pod.Namespace != want[0].pod.Namespace ||
		got[0].pod.Name != want[0].pod.Name || got[0].pid != want[0].pid || got[0].v != want[0].v {
		t.Errorf("journaled %+v, want %+v", got, want)
	}
}

// TestStartContainerJournalFailsOpen: a journal that fails or is held
// longer than the plugin's bound never stops the container: StartContainer
// answers, and a held journal still gets the container once it lets go.
func TestStartContainerJournalFailsOpen(t *testing.T) {
	rt := startRuntime(t)
	j := &rtJournal{err: errors.New("journal unwritable"), hold: make(chan struct{})}
	p := nri.New(rt.socket, logr.Discard(), j.opt(), nri.WithBound(20*time.Millisecond))
	p.Publish(rtGrants())
	startPlugin(t, p)
	nrt := &nritest.Runtime{R: rt.r, Socket: rt.socket}
	c := ctr("c-rt", "")
	wantSched(t, create(t, rt, rtPod("trading", "fifo:30"), c), api.LinuxSchedulerPolicy_SCHED_FIFO, 30)
	c.Pid = 4242
	nrt.Start(t, rtPod("trading", "fifo:30"), c)
	// Had the plugin waited for the journal, the runtime would have timed
	// the request out and closed the plugin: it would adjust nothing now.
	wantSched(t, create(t, rt, rtPod("trading", "fifo:30"), ctr("c-next", "")), api.LinuxSchedulerPolicy_SCHED_FIFO, 30)
	if got := j.calls(); len(got) != 0 {
		t.Fatalf("journal answered while held: %+v", got)
	}
	close(j.hold)
	deadline := time.Now().Add(10 * time.Second)
	for len(j.calls()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the held journal never got the container")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
