package loop

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func rebooting(rev string) *v1alpha1.NodeRebootSpec {
	return &v1alpha1.NodeRebootSpec{Revision: rev, Phase: v1alpha1.RebootRequested, Since: metav1.Now()}
}

func TestDecideReboot(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0).UTC()
	rec := &rebootRecord{Revision: "r1", FromBoot: "b1", RequestedAt: t0, Done: "r0"}
	cases := []struct {
		name        string
		spec        *v1alpha1.NodeRebootSpec
		state       v1alpha1.BootState
		boot        string
		rec         *rebootRecord
		at          time.Duration
		reboot      bool
		rebootedFor string
		failed      bool
	}{
		{name: "no request", state: v1alpha1.BootStaged, boot: "b1"},
		{name: "draining: not yet", spec: &v1alpha1.NodeRebootSpec{Revision: "r1", Phase: v1alpha1.RebootDraining}, state: v1alpha1.BootStaged, boot: "b1"},
		{name: "asked, staged: reboot", spec: rebooting("r1"), state: v1alpha1.BootStaged, boot: "b1", reboot: true},
		{name: "asked, unstaged (a rollback): reboot", spec: rebooting("r1"), state: v1alpha1.BootUnstaged, boot: "b1", reboot: true},
		{name: "asked, nothing to take out: no reboot", spec: rebooting("r1"), state: v1alpha1.BootNotNeeded, boot: "b1"},
		{name: "asked, nothing staged", spec: rebooting("r1"), state: v1alpha1.BootBooted, boot: "b1"},
		{name: "asked, conflict", spec: rebooting("r1"), state: v1alpha1.BootConflict, boot: "b1"},
		{name: "asked for another boot", spec: &v1alpha1.NodeRebootSpec{Revision: "r1", Phase: v1alpha1.RebootRequested, BootID: "b0"}, state: v1alpha1.BootStaged, boot: "b1"},
		{name: "already asked this boot (a restart after the record)", spec: rebooting("r1"), state: v1alpha1.BootStaged, boot: "b1", rec: rec, at: time.Minute, rebootedFor: "r0"},
		{name: "asked long ago, same boot: failed, not asked again", spec: rebooting("r1"), state: v1alpha1.BootStaged, boot: "b1", rec: rec, at: DefaultRebootFailAfter, rebootedFor: "r0", failed: true},
		{name: "rebooted: never again for r1, even if staged", spec: rebooting("r1"), state: v1alpha1.BootStaged, boot: "b2", rec: rec, at: time.Hour, rebootedFor: "r1"},
		{name: "next revision", spec: rebooting("r2"), state: v1alpha1.BootStaged, boot: "b2", rec: rec, at: time.Hour, reboot: true, rebootedFor: "r1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decideReboot(c.spec, c.state, c.boot, c.rec, t0.Add(c.at), DefaultRebootFailAfter)
			if d.Reboot != c.reboot || d.RebootedFor != c.rebootedFor || (d.Failed != "") != c.failed {
				t.Fatalf("got %+v", d)
			}
			if d.Reboot && (d.Record.Revision != c.spec.Revision || d.Record.FromBoot != c.boot || d.Record.Done != c.rebootedFor) {
				t.Errorf("record %+v", d.Record)
			}
		})
	}
}

// TestBootPassRebootsOncePerRevision runs the agent's reboot step as a
// crash and restart would: the record is written before systemd is asked,
// a restarted agent (a new Reconciler, the same host) never asks again in
// that boot, reports Failed once the boot is overdue, and after the boot
// reports rebootedFor.
func TestBootPassRebootsOncePerRevision(t *testing.T) {
	root := testroot.New(t, nil)
	fc := clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))
	var calls int
	crash := errors.New("agent killed before systemd answered")
	// The node's guard passes: its Node cordoned by the manager for r1,
	// one reboot slot (guard.go; the refusals are TestAgentGuardsItsOwnReboot's).
	c := fake.NewClientBuilder().WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Annotations: map[string]string{v1alpha1.RebootCordonAnnotation: "r1"}}, Spec: corev1.NodeSpec{Unschedulable: true}}).Build()
	slots := filepath.Join(t.TempDir(), "slots")
	testroot.Write(t, slots, "1")
	newAgent := func() *Reconciler {
		return &Reconciler{Client: c, NodeName: "n1", Root: root, Clock: fc, Boot: BootOptions{SlotsFile: slots, SlotsNamespace: "ns", Reboot: func(context.Context) error {
			calls++
			if !root.Exists(root.Path("var/lib/latencytier", rebootFile)) {
				t.Error("asked systemd before the record was on disk")
			}
			return crash
		}}}
	}
	ln := &v1alpha1.LatencyNode{Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Reboot: rebooting("r1")}}
	staged := func(boot string) *v1alpha1.LatencyNodeStatus {
		return &v1alpha1.LatencyNodeStatus{Boot: &v1alpha1.BootStatus{State: v1alpha1.BootStaged, BootID: boot}}
	}
	ctx := context.Background()
	st := staged("b1")
	newAgent().bootPass(ctx, ln, st)
	if calls != 1 {
		t.Fatalf("reboot asked %d times, want 1", calls)
	}
	for range 3 {
		st = staged("b1")
		newAgent().bootPass(ctx, ln, st)
	}
	if calls != 1 || st.Boot.State != v1alpha1.BootStaged {
		t.Fatalf("after restarts: asked %d times, state %s", calls, st.Boot.State)
	}
	fc.SetTime(fc.Now().Add(DefaultRebootFailAfter))
	st = staged("b1")
	newAgent().bootPass(ctx, ln, st)
	if calls != 1 || st.Boot.State != v1alpha1.BootFailed {
		t.Fatalf("overdue: asked %d times, state %s (%s)", calls, st.Boot.State, st.Boot.Message)
	}
	st = staged("b2")
	newAgent().bootPass(ctx, ln, st)
	if calls != 1 || st.Boot.RebootedFor != "r1" {
		t.Fatalf("after the boot: asked %d times, rebootedFor %q", calls, st.Boot.RebootedFor)
	}
}

func TestBootRebootCondition(t *testing.T) {
	arg := func(a string, present bool) v1alpha1.BootArgument {
		return v1alpha1.BootArgument{Argument: a, Present: present}
	}
	cases := []struct {
		b    v1alpha1.BootStatus
		want metav1.ConditionStatus
	}{
		{v1alpha1.BootStatus{State: v1alpha1.BootNotNeeded}, metav1.ConditionFalse},
		{v1alpha1.BootStatus{State: v1alpha1.BootBooted, Arguments: []v1alpha1.BootArgument{arg("nohz_full=1", true)}}, metav1.ConditionFalse},
		{v1alpha1.BootStatus{State: v1alpha1.BootPlanned, Arguments: []v1alpha1.BootArgument{arg("nohz_full=1", false)}}, metav1.ConditionTrue},
		{v1alpha1.BootStatus{State: v1alpha1.BootStaged, Arguments: []v1alpha1.BootArgument{arg("nohz_full=1", false)}}, metav1.ConditionTrue},
		{v1alpha1.BootStatus{State: v1alpha1.BootUnstaged, Arguments: []v1alpha1.BootArgument{arg("nohz_full=1", true)}}, metav1.ConditionTrue},
		{v1alpha1.BootStatus{State: v1alpha1.BootUnsupported, Arguments: []v1alpha1.BootArgument{arg("nohz_full=1", false)}}, metav1.ConditionTrue},
	}
	for _, c := range cases {
		if got := bootRebootCondition(&c.b); got.Status != c.want {
			t.Errorf("%s: %+v", c.b.State, got)
		}
	}
}

// A change of the boot status is written at once, not at the heartbeat.
func TestBootIsMaterial(t *testing.T) {
	now := metav1.Now()
	w := v1alpha1.LatencyNodeStatus{ReportedAt: &now, Boot: &v1alpha1.BootStatus{State: v1alpha1.BootStaged, BootID: "b1"}}
	n := *w.DeepCopy()
	n.Boot.State = v1alpha1.BootFailed
	if due, why := reportDue(w, nil, n, v1alpha1.LatencyNodeSpec{}, now.Time, time.Hour); !due || why != "boot" {
		t.Errorf("due %v why %q", due, why)
	}
	if due, _ := reportDue(w, nil, *w.DeepCopy(), v1alpha1.LatencyNodeSpec{}, now.Time, time.Hour); due {
		t.Error("an unchanged boot status is written before the heartbeat")
	}
}
