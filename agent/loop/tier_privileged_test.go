//go:build privileged

package loop

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/internal/tiertest"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/tiersched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

// The loop on this machine's real kernel, which has no sched_ext, and a
// real API server. A LatencyNode asking for class Tier reports
// scheduler/class Unsupported with the kernel's reason and loads and pins
// nothing, while the node's other setting (autogroup, flipped from what
// the kernel holds) still applies and the node is Applied: one refused
// setting never parks the rest. The node reports the fair class. Asked for
// Fair instead, the class reads fair and is in place with nothing written
// or journaled for it. A revert restores autogroup.
func TestLoopTierOnAKernelWithoutSchedExt(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	if _, err := os.Stat("/sys/kernel/sched_ext"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("/sys/kernel/sched_ext: %v; this test asserts the refusal on a kernel without sched_ext", err)
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Fatalf("no kernel BTF here (%v): the refusal would be the BTF one, not sched_ext's", err)
	}
	autogroup := root.Proc("sys", "kernel", "sched_autogroup_enabled")
	testroot.Restore(t, autogroup)
	orig := testroot.Read(t, autogroup)
	toggle, want := v1alpha1.Disabled, "0"
	if orig == "0" {
		toggle, want = v1alpha1.Enabled, "1"
	}
	mapsBefore := tiertest.LoadedMaps(t)

	c, env := startAPI(t)
	ctx := context.Background()
	sp := tierSpec(v1alpha1.SchedulerClassTier, "gateway-1")
	sp.Tuning.Scheduler.Autogroup = &toggle
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-real"}, Spec: sp}
	if err := c.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	startAgent(t, env, root, "node-real")
	key := client.ObjectKey{Name: "node-real"}
	get := func() *v1alpha1.LatencyNode {
		got := &v1alpha1.LatencyNode{}
		if err := c.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	eventually(t, "scheduler/class reported", func() bool {
		got := get()
		return settingOf(got, tiersched.SettingID) != nil && conditionIs(got, v1alpha1.NodeApplied, metav1.ConditionTrue)
	})
	got := get()
	rel := strings.TrimSpace(testroot.Read(t, root.Proc("sys", "kernel", "osrelease")))
	reason := "sched_ext is not built into this kernel (Linux " + rel + "; no /sys/kernel/sched_ext)"
	if s := settingOf(got, tiersched.SettingID); s.State != v1alpha1.SettingUnsupported || !strings.Contains(s.Message, reason) ||
		s.Desired != tiersched.Tier || s.Actual != tiersched.Fair {
		t.Errorf("scheduler/class = %+v, want Unsupported from %s to fair, message containing %q", *s, tiersched.Tier, reason)
	}
	if a := settingOf(got, "scheduler/autogroup"); a == nil || a.State != v1alpha1.SettingApplied {
		t.Errorf("scheduler/autogroup = %+v beside the refused class, want Applied", a)
	}
	if v := testroot.Read(t, autogroup); v != want {
		t.Errorf("sched_autogroup_enabled = %s, want %s: the refused class held back the node's other setting", v, want)
	}
	if k := got.Status.Kernel; k == nil || k.ActiveClass != "fair" || (k.SchedExt != nil && k.SchedExt.Supported) {
		t.Errorf("kernel facts %+v, want activeClass fair and no sched_ext", k)
	}
	if n := tiertest.LoadedMaps(t); n != mapsBefore {
		t.Errorf("the tier scheduler's maps in the kernel went from %d to %d: something was loaded", mapsBefore, n)
	}
	if _, err := os.Stat(tiersched.PinDir(root)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pin directory %s: %v, want none", tiersched.PinDir(root), err)
	}
	if ex, err := tiersched.ReadExit(root); err != nil || ex != nil {
		t.Errorf("exit marker %+v, %v; want none (nothing was loaded, nothing ejected)", ex, err)
	}

	// The refused load was journaled before the attempt (original fair),
	// as every write is; what it records as written is the baseline below.
	j, err := journal.Load(root)
	if err != nil || j == nil || j.Find(tiersched.SettingID) == nil {
		t.Fatalf("journal %+v, %v; want the entry of the refused attempt", j, err)
	}
	written := slices.Clone(j.Find(tiersched.SettingID).Written)

	// Fair on the fair class: in place, nothing written for it.
	got.Spec = tierSpec(v1alpha1.SchedulerClassFair, "gateway-2")
	got.Spec.Tuning.Scheduler.Autogroup = &toggle
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "scheduler/class Fair decided", func() bool {
		s := settingOf(get(), tiersched.SettingID)
		return s != nil && s.Desired == tiersched.Fair
	})
	got = get()
	if s := settingOf(got, tiersched.SettingID); s.State != v1alpha1.SettingApplied || s.Actual != tiersched.Fair {
		t.Errorf("scheduler/class = %+v, want Applied at fair", *s)
	}
	if !conditionIs(got, v1alpha1.NodeApplied, metav1.ConditionTrue) {
		t.Errorf("conditions %+v, want Applied=True", got.Status.Conditions)
	}
	if j, err = journal.Load(root); err != nil || j == nil || j.Find(tiersched.SettingID) == nil {
		t.Fatalf("journal %+v, %v", j, err)
	}
	if en := j.Find(tiersched.SettingID); !slices.Equal(en.Written, written) || en.Original != tiersched.Fair {
		t.Errorf("journal entry for scheduler/class %+v, written before %q: fair on the fair class wrote something", *en, written)
	}

	// Revert: autogroup back, nothing of the class left.
	got.Spec = v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionRevert}
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Reverted=True", func() bool { return conditionIs(get(), v1alpha1.NodeReverted, metav1.ConditionTrue) })
	if v := testroot.Read(t, autogroup); v != orig {
		t.Errorf("sched_autogroup_enabled after the revert = %s, want %s", v, orig)
	}
	if _, err := os.Stat(tiersched.PinDir(root)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pin directory %s after the revert: %v, want none", tiersched.PinDir(root), err)
	}
}
