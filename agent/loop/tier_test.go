package loop

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/tiersched"
	tbpf "latencytier.io/latencytier/agent/tiersched/bpf"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// tierSpec is a node spec at revision asking for class (and autogroup
// off, a setting beside it).
func tierSpec(class v1alpha1.SchedulerClass, revision string) v1alpha1.LatencyNodeSpec {
	dis := v1alpha1.Disabled
	return v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "gateway", ProfileGeneration: 1, Revision: revision,
		Tuning: v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{Autogroup: &dis, Class: &class}}}
}

// settingOf is the status's result for id, nil when it has none.
func settingOf(ln *v1alpha1.LatencyNode, id string) *v1alpha1.SettingResult {
	for i := range ln.Status.Settings {
		if ln.Status.Settings[i].Setting == id {
			return &ln.Status.Settings[i]
		}
	}
	return nil
}

// schedExtSysfs writes /sys/kernel/sched_ext under root in the kernel's
// formats; ops "" means no root/ directory (nothing attached).
func schedExtSysfs(t *testing.T, root *host.Root, state string, enableSeq string, ops string) {
	t.Helper()
	dir := root.Sys("kernel", "sched_ext")
	sw := "0"
	if ops != "" {
		sw = "1"
	}
	testroot.Write(t, filepath.Join(dir, "state"), state+"\n")
	testroot.Write(t, filepath.Join(dir, "switch_all"), sw+"\n")
	testroot.Write(t, filepath.Join(dir, "enable_seq"), enableSeq+"\n")
	testroot.Write(t, filepath.Join(dir, "nr_rejected"), "0\n")
	if ops != "" {
		testroot.Write(t, filepath.Join(dir, "root", "ops"), ops+"\n")
	} else if err := os.RemoveAll(filepath.Join(dir, "root")); err != nil {
		t.Fatal(err)
	}
}

// The kernel ejects the tier scheduler while the loop runs: the watcher
// (the Runnable Run adds beside the reconciler) records the exit marker
// with the node's revision and enqueues a pass, which reports Fallback
// with the kernel's reason and the Applied condition SchedulerFallback;
// later passes keep reporting it and do not load the scheduler again,
// until a new revision clears the marker.
//
// The host root is a temp dir laid out as the kernel lays out
// /sys/kernel/sched_ext, the repo's pattern for layouts this machine lacks.
// The pin of our scheduler's link is a plain file there (a temp dir is no
// bpffs): the kernel's exit info cannot be read through it, so the reason
// is the "gone without exit info" one, and it cannot be unpinned, so the
// test removes it as Unpin removes a real pin. The resync is an hour
// away: every pass here comes from a watch or the watcher's signal.
func TestTierEjectionEnqueuesAFallbackPass(t *testing.T) {
	c, env := startAPI(t)
	ctx := context.Background()
	root := fakeHost(t)
	schedExtSysfs(t, root, "enabled", "3", tbpf.OpsName)
	link := filepath.Join(tiersched.PinDir(root), "link")
	testroot.Write(t, link, "")

	const rev = "gateway-5d8f7c"
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-tier"}, Spec: tierSpec(v1alpha1.SchedulerClassTier, rev)}
	if err := c.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	passes := &passCounter{}
	startObservedAgent(t, env, root, "node-tier", time.Hour, passes)
	key := client.ObjectKey{Name: "node-tier"}
	get := func() *v1alpha1.LatencyNode {
		got := &v1alpha1.LatencyNode{}
		if err := c.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	// Attached and pinned: the class is ours, already in place.
	eventually(t, "scheduler/class Applied at ext:latencytier", func() bool {
		s := settingOf(get(), tiersched.SettingID)
		return s != nil && s.State == v1alpha1.SettingApplied && s.Actual == tiersched.Tier
	})
	if got := get(); !conditionIs(got, v1alpha1.NodeApplied, metav1.ConditionTrue) {
		t.Fatalf("before the ejection: conditions %+v, want Applied=True", got.Status.Conditions)
	}
	if ex, err := tiersched.ReadExit(root); err != nil || ex != nil {
		t.Fatalf("exit marker before any ejection: %+v, %v", ex, err)
	}
	before := passes.n.Load()

	// The kernel ejects it: sched_ext disabled, nothing attached, the
	// pins still held by the agent.
	schedExtSysfs(t, root, "disabled", "3", "")
	var ex *tiersched.Exit
	eventually(t, "the watcher's exit marker", func() bool {
		ex, _ = tiersched.ReadExit(root)
		return ex != nil
	})
	if err := os.Remove(link); err != nil { // what Unpin does to a real pin
		t.Fatal(err)
	}
	if ex.Revision != rev || ex.EnableSeq != 3 || !strings.Contains(ex.Reason, "gone without exit info (kernel shows") {
		t.Errorf("marker %+v, want revision %s, enable_seq 3 and the reason of an exit without info", ex, rev)
	}
	wantMsg := "kernel ejected latencytier: gone without exit info"
	eventually(t, "scheduler/class Fallback", func() bool {
		s := settingOf(get(), tiersched.SettingID)
		return s != nil && s.State == v1alpha1.SettingFallback
	})
	got := get()
	if passes.n.Load() <= before {
		t.Errorf("no pass after the ejection (%d before, %d now): the watcher's signal enqueued nothing", before, passes.n.Load())
	}
	s := settingOf(got, tiersched.SettingID)
	if !strings.HasPrefix(s.Message, wantMsg) || s.Desired != tiersched.Tier || s.Actual != tiersched.Fair {
		t.Errorf("scheduler/class = %+v, want Fallback from %s to fair with the message %q...", *s, tiersched.Tier, wantMsg)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.NodeApplied)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonSchedulerFallback || !strings.Contains(cond.Message, wantMsg) {
		t.Errorf("Applied = %+v, want False, reason %s, naming the kernel's reason", cond, v1alpha1.ReasonSchedulerFallback)
	}
	if a := settingOf(got, "scheduler/autogroup"); a == nil || a.State != v1alpha1.SettingApplied {
		t.Errorf("scheduler/autogroup = %+v beside the fallback, want Applied", a)
	}

	// Another pass at the same revision (an annotation runs one): still
	// Fallback, the marker kept, nothing loaded or pinned again.
	n := passes.n.Load()
	got.Annotations = map[string]string{"test/poke": "1"}
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a pass after the poke", func() bool { return passes.n.Load() > n })
	if s := settingOf(get(), tiersched.SettingID); s == nil || s.State != v1alpha1.SettingFallback {
		t.Errorf("scheduler/class on the next pass = %+v, want Fallback still", s)
	}
	if ex, _ := tiersched.ReadExit(root); ex == nil || ex.Revision != rev {
		t.Errorf("marker after the next pass = %+v, want it kept for %s", ex, rev)
	}
	if root.Exists(link) {
		t.Error("the scheduler was pinned again after its ejection")
	}

	// A new revision is a new decision: the marker goes, and the class is
	// asked for again (this temp dir has no kernel BTF, so it is refused).
	got = get()
	got.Spec.Revision = "gateway-6a1b2c"
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "scheduler/class decided again for the new revision", func() bool {
		s := settingOf(get(), tiersched.SettingID)
		return s != nil && s.State != v1alpha1.SettingFallback
	})
	if ex, err := tiersched.ReadExit(root); err != nil || ex != nil {
		t.Errorf("marker after a new revision = %+v, %v; want it cleared", ex, err)
	}
	if s := settingOf(get(), tiersched.SettingID); s.State != v1alpha1.SettingUnsupported || !strings.Contains(s.Message, "BTF") {
		t.Errorf("scheduler/class at the new revision = %+v, want Unsupported for the missing BTF", *s)
	}
}
