package measure

import (
	"fmt"
	"slices"
	"testing"

	"latencytier.io/latencytier/agent/measure/bpf"
)

// TestPodSlotsAssign: a pod keeps its histogram while it is measured, a
// slot freed by a pod that left goes to a new pod (and is re-based), and
// the pods past bpf.PodSlots-1 share bpf.OtherSlot, counted.
func TestPodSlotsAssign(t *testing.T) {
	var s podSlots
	fresh, shared := s.assign([]string{"a", "b", "c"})
	if !slices.Equal(fresh, []uint32{0, 1, 2}) || shared != 0 {
		t.Fatalf("first assignment: fresh %v shared %d", fresh, shared)
	}
	fresh, shared = s.assign([]string{"a", "c", "d"})
	if !slices.Equal(fresh, []uint32{1}) || shared != 0 || s.byUID["a"] != 0 || s.byUID["c"] != 2 || s.byUID["d"] != 1 {
		t.Fatalf("b left, d came: fresh %v shared %d slots %v", fresh, shared, s.byUID)
	}
	var many []string
	for i := range bpf.PodSlots + 9 {
		many = append(many, fmt.Sprintf("p%04d", i))
	}
	fresh, shared = s.assign(many)
	if shared != 10 || len(fresh) != bpf.PodSlots-1 {
		t.Fatalf("%d pods: %d fresh slots, %d shared, want %d and 10", len(many), len(fresh), shared, bpf.PodSlots-1)
	}
	if got := s.byUID[many[len(many)-1]]; got != bpf.OtherSlot {
		t.Errorf("the last pod has slot %d, want the shared %d", got, bpf.OtherSlot)
	}
	if got := s.byUID[many[0]]; got == bpf.OtherSlot {
		t.Errorf("the first pod shares the other slot")
	}
	// A pod in the shared slot gets its own once one is free.
	fresh, shared = s.assign(many[1:])
	if shared != 9 || len(fresh) != 1 {
		t.Errorf("one pod left: fresh %v, %d shared, want one fresh and 9", fresh, shared)
	}
}

// TestPodRunQueue: a pod's p99 is its own histogram's.
func TestPodRunQueue(t *testing.T) {
	var h Hist
	h.Record(10_000, 99)
	h.Record(5_000_000, 2)
	p := podRunQueue(&h)
	if p.Samples != 101 || p.P99 < 4_000_000 {
		t.Errorf("podRunQueue = %+v, want 101 samples and a p99 near 5ms", p)
	}
	if p := podRunQueue(&Hist{}); p != (PodRunQueue{}) {
		t.Errorf("empty histogram: %+v", p)
	}
}
