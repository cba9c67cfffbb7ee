package tiersched

import (
	"fmt"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/podcgroup"
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
