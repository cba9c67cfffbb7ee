package loop

import (
	"context"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/owners"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/snapshot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// placingHook is the NRI plugin as the pass sees it, with placements.
type placingHook struct {
	recordingHook
	placed []owners.Placement
}

func (h *placingHook) Placements() []owners.Placement { return h.placed }

// The pass hands Detect the hook's placements and the cgroups its journal
// holds: a cpuset another plugin set holds its CPUs, a cpuset the agent
// wrote (journaled) holds nothing.
func TestPassDetectsOwnersWithTheHookAndTheJournal(t *testing.T) {
	const uid = "aaaaaaaa-0000-4000-8000-000000000001"
	ctr := "sys/fs/cgroup/cpuset/kubepods/pod" + uid + "/0123456789abcdef/cpuset.cpus"
	root := testroot.New(t, map[string]string{"sys/devices/system/cpu/online": "0-3\n", "sys/fs/cgroup/cpuset/cpuset.cpus": "0-3\n", ctr: "2\n"})
	j := journal.New("11111111-2222-3333-4444-555555555555")
	j.Record("cpuset/pod/team/a/"+uid+"/0123456789ab", ctr, "0-3", "0-3", "2")
	if err := journal.Save(root, j); err != nil {
		t.Fatal(err)
	}
	h := &placingHook{placed: []owners.Placement{{PodUID: "other", Namespace: "web", Pod: "b", ContainerID: "c1", Container: "app", CPUs: "1"}}}
	r := &Reconciler{Root: root, Hook: h}
	pods := []podcgroup.Pod{{UID: uid, Namespace: "team", Name: "a"}}
	set := r.owners(context.Background(), snapshot.Node{CPUs: snapshot.CPUs{Isolated: cpuset.New(3)}}, pods)
	if len(set.Holds) != 1 || !set.Holds[0].CPUs.Equals(cpuset.New(1)) {
		t.Fatalf("holds %+v (errs %v); want the hook's placement on CPU 1 only", set.Holds, set.Errs)
	}
	r0, owned := set.OwnerOf(knob.Knob{ID: "cpuset/system.slice", Desired: "0-1"})
	if !owned || r0.State != v1alpha1.SettingOwnedBy {
		t.Fatalf("a slice on CPUs 0-1: %+v %v; want OwnedBy the plugin", r0, owned)
	}
}
