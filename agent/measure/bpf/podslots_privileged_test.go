//go:build privileged

package bpf

import (
	"testing"
	"time"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/podcgroup"
)

// TestPodSlotsSplitPods: two measured pods' tasks, one with slot 3 and one
// past the per-pod histograms (OtherSlot), each count in their own slot
// only, with and without attribution (the two ways on_switch finds a
// measured task), and a slot no pod has stays empty. It writes only its
// own cgroups (no kernellock).
func TestPodSlotsSplitPods(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithoutAttribution()}} {
		a := cgtest.V1Pod(t, "cpu", podcgroup.DriverCgroupfs, "ltslots-", nil)
		b := a.Sibling(t)
		tr, err := Open(opts...)
		if err != nil {
			t.Fatal(err)
		}
		ia, err := host.New("/").Inode(a.CtrDir)
		if err != nil {
			t.Fatal(err)
		}
		ib, err := host.New("/").Inode(b.CtrDir)
		if err != nil {
			t.Fatal(err)
		}
		slots := []uint32{3, OtherSlot, 4}
		before, err := tr.ReadPodSlots(slots)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.SetPodCgroups([]PodCgroup{{ID: ia, Slot: 3}, {ID: ib, Slot: OtherSlot}}); err != nil {
			t.Fatal(err)
		}
		cgtest.StartIn(t, a.CtrDir, "sh", "-c", "while :; do sleep 0.001; done")
		cgtest.StartIn(t, b.CtrDir, "sh", "-c", "while :; do sleep 0.001; done")
		time.Sleep(time.Second)
		after, err := tr.ReadPodSlots(slots)
		if err != nil {
			t.Fatal(err)
		}
		_ = tr.Close()
		grew := make([]uint64, len(slots))
		for i := range slots {
			for j := range after[i].Slots {
				grew[i] += after[i].Slots[j] - before[i].Slots[j]
			}
		}
		t.Logf("attribution %v: slot 3 %d waits, other slot %d, slot 4 %d", tr.Attribution(), grew[0], grew[1], grew[2])
		if grew[0] < 100 || grew[1] < 100 || grew[2] != 0 {
			t.Errorf("attribution %v: waits per slot %v, want 100 or more in slots 3 and %d, none in 4", tr.Attribution(), grew, OtherSlot)
		}
	}
	if _, err := (&Tracer{}).ReadPodSlots([]uint32{PodSlots}); err == nil {
		t.Error("a slot past PodSlots was read")
	}
}
