package tiersched

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// pod lays out a burstable pod's cgroup v2 tree (systemd driver) with one
// container, its cpu.max values as given.
func (f *fixture) pod(uid, podMax, ctrMax string) podcgroup.Pod {
	esc := strings.ReplaceAll(uid, "-", "_")
	dir := "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc + ".slice"
	f.write(dir+"/cpu.max", podMax+"\n")
	f.write(dir+"/cri-containerd-"+uid+"c.scope/cpu.max", ctrMax+"\n")
	return podcgroup.Pod{UID: uid, Namespace: "ns", Name: "p-" + uid}
}

func TestQuotaRefusal(t *testing.T) {
	f := newFixture(t)
	f.write("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
	free := f.pod("a1", "max 100000", "max 100000")
	limited := f.pod("b2", "max 100000", "50000 100000")
	removed := f.pod("c3", "200000 100000", "max 100000")
	if r := QuotaRefusal(f.root, []podcgroup.Pod{free}, nil); r != nil {
		t.Errorf("unlimited pod refused: %v", r)
	}
	r := QuotaRefusal(f.root, []podcgroup.Pod{free, limited, removed}, func(p podcgroup.Pod) bool { return p.UID == "c3" })
	if r == nil || r.Class != kerr.Unsupported || !strings.Contains(r.Reason, "(ns/p-b2): under sched_ext only the BPF scheduler can enforce cpu.max") {
		t.Fatalf("refusal %v, want Unsupported naming ns/p-b2 only", r)
	}
	var many []podcgroup.Pod
	for i := range 11 {
		many = append(many, f.pod(fmt.Sprintf("d%02d", i), "10000 100000", "max 100000"))
	}
	if r := QuotaRefusal(f.root, many, nil); r == nil || !strings.Contains(r.Reason, "ns/p-d07 and 3 more)") || strings.Contains(r.Reason, "p-d08") {
		t.Errorf("refusal of 11 pods: %v, want 8 named and 3 more", r)
	}
}

func TestCgroupIDsOfGrantedPods(t *testing.T) {
	f := newFixture(t)
	f.write("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
	granted := f.pod("a1", "max 100000", "max 100000")
	granted.OptedIn = true
	other := f.pod("b2", "max 100000", "max 100000")
	ids, err := CgroupIDs(f.root, []podcgroup.Pod{granted, other, {UID: "gone", OptedIn: true}})
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := podcgroup.Find(f.root, "a1")
	if err != nil {
		t.Fatal(err)
	}
	podIno, _ := f.root.Inode(dirs.Pod)
	ctrIno, _ := f.root.Inode(dirs.Containers[0])
	if len(ids) != 2 || ids[0] != podIno || ids[1] != ctrIno {
		t.Errorf("ids %v, want the granted pod's %d and its container's %d only", ids, podIno, ctrIno)
	}
}

func TestDesire(t *testing.T) {
	f := newFixture(t)
	f.write("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
	tier, fair := ptr.To(v1alpha1.SchedulerClassTier), ptr.To(v1alpha1.SchedulerClassFair)
	k, r, err := Desire(f.root, tier, "rev-1", nil)
	if err != nil || len(r) != 0 || len(k) != 1 || k[0].Desired != Tier {
		t.Fatalf("wanted on a clean node: knobs %+v results %+v %v", k, r, err)
	}
	if k, r, _ := Desire(f.root, nil, "rev-1", nil); len(k)+len(r) != 0 {
		t.Errorf("class unset: knobs %+v results %+v, want nothing", k, r)
	}
	if k, r, _ := Desire(f.root, fair, "rev-1", nil); len(k) != 1 || k[0].Desired != Fair || len(r) != 0 {
		t.Errorf("class Fair: knobs %+v results %+v, want the fair knob", k, r)
	}
	// A limited pod, its quota not removed: refused.
	limited := f.pod("b2", "max 100000", "50000 100000")
	if k, r, _ := Desire(f.root, tier, "rev-1", []podcgroup.Pod{limited}); len(k) != 0 || len(r) != 1 || r[0].State != v1alpha1.SettingUnsupported {
		t.Errorf("limited pod: knobs %+v results %+v, want Unsupported", k, r)
	}
	limited.OptedIn = true // the profile removes its quota
	if k, _, _ := Desire(f.root, tier, "rev-1", []podcgroup.Pod{limited}); len(k) != 1 {
		t.Error("a pod whose quota the profile removes still refused the scheduler")
	}
	limited.Burst = true // a burst keeps the quota
	if k, _, _ := Desire(f.root, tier, "rev-1", []podcgroup.Pod{limited}); len(k) != 0 {
		t.Error("a Burst pod keeps its quota, yet the scheduler was not refused")
	}
	// An ejection at rev-1: Fallback at rev-1, on every pass.
	b, _ := json.Marshal(Exit{Revision: "rev-1", Kind: 1026, Reason: "runnable task stall", Msg: "sh[99] failed to run for 5.004s"})
	if err := f.root.WriteOwn(ExitFile, b); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		k, r, err = Desire(f.root, tier, "rev-1", nil)
		if err != nil || len(k) != 0 || len(r) != 1 || r[0].State != v1alpha1.SettingFallback ||
			r[0].Message != "kernel ejected latencytier: runnable task stall (sh[99] failed to run for 5.004s)" {
			t.Fatalf("after the ejection: knobs %+v results %+v %v, want Fallback with the kernel's reason", k, r, err)
		}
	}
	// A new revision clears it and asks again.
	if k, r, _ := Desire(f.root, tier, "rev-2", nil); len(k) != 1 || len(r) != 0 {
		t.Errorf("new revision: knobs %+v results %+v, want the knob", k, r)
	}
	if ex, _ := ReadExit(f.root); ex != nil {
		t.Errorf("marker kept across revisions: %+v", ex)
	}
	// A revert (nothing wanted) clears it too.
	if err := f.root.WriteOwn(ExitFile, b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Desire(f.root, nil, "rev-1", nil); err != nil {
		t.Fatal(err)
	}
	if ex, _ := ReadExit(f.root); ex != nil {
		t.Errorf("marker kept after a revert: %+v", ex)
	}
}
