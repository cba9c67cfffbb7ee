package measure

import (
	"fmt"
	"slices"
	"time"

	"latencytier.io/latencytier/agent/measure/bpf"
)

// Per-pod run-queue latency: the tracer keeps one histogram per measured
// pod (bpf.PodSlots of them, the last shared by every pod past the
// others). A pod keeps its slot while it is measured, so its histogram's
// growth between two reads is its window; a slot given to another pod is
// re-based once the old pod's cgroups are out of the tracer's set.

// PodRunQueue is one measured pod's run-queue latency in a window.
type PodRunQueue struct {
	// Samples is how many waits of the pod's tasks ended in the window.
	Samples int64 `json:"samples"`
	// P99 is their 99th percentile (0 without samples).
	P99 time.Duration `json:"p99"`
}

// podSlots gives measured pods (by uid) their histogram slots and keeps
// each slot's cumulative counts at the last read.
type podSlots struct {
	byUID map[string]uint32
	base  map[uint32]bpf.CPUHist
}

// assign gives every uid in uids a slot for the next window: the one it
// has, else the lowest free one, else bpf.OtherSlot. It returns the slots
// that changed hands (to be re-based) and how many pods share OtherSlot.
func (s *podSlots) assign(uids []string) (fresh []uint32, shared int) {
	keep := make(map[string]uint32, len(uids))
	used := map[uint32]bool{}
	for _, u := range uids {
		if sl, ok := s.byUID[u]; ok && sl != bpf.OtherSlot {
			keep[u], used[sl] = sl, true
		}
	}
	next := uint32(0)
	for _, u := range uids {
		if _, ok := keep[u]; ok {
			continue
		}
		for next < bpf.OtherSlot && used[next] {
			next++
		}
		if next == bpf.OtherSlot {
			keep[u] = bpf.OtherSlot
			shared++
			continue
		}
		keep[u], used[next] = next, true
		fresh = append(fresh, next)
	}
	s.byUID = keep
	return fresh, shared
}

// rebase takes the slots' current counts as their base.
func (s *podSlots) rebase(t *bpf.Tracer, slots []uint32) error {
	if len(slots) == 0 {
		return nil
	}
	cur, err := t.ReadPodSlots(slots)
	if err != nil {
		return err
	}
	if s.base == nil {
		s.base = map[uint32]bpf.CPUHist{}
	}
	for i, sl := range slots {
		s.base[sl] = cur[i]
	}
	return nil
}

// read returns, per pod (namespace/name) of victims that has a slot of
// its own, its run-queue latency since the previous read, and takes the
// counts read as the slots' new base.
func (s *podSlots) read(t *bpf.Tracer, victims map[uint64]podRef) (map[string]PodRunQueue, error) {
	refs := map[string]podRef{}
	for _, r := range victims {
		refs[r.uid] = r
	}
	var slots []uint32
	var pods []podRef
	for uid, r := range refs {
		if sl, ok := s.byUID[uid]; ok && sl != bpf.OtherSlot {
			slots, pods = append(slots, sl), append(pods, r)
		}
	}
	if len(slots) == 0 {
		return nil, nil
	}
	cur, err := t.ReadPodSlots(slots)
	if err != nil {
		return nil, err
	}
	out := make(map[string]PodRunQueue, len(slots))
	for i, sl := range slots {
		prev := s.base[sl]
		var h Hist
		for j, c := range cur[i].Slots {
			if c >= prev.Slots[j] {
				h.Slots[j] = c - prev.Slots[j]
			}
		}
		s.base[sl] = cur[i]
		out[pods[i].namespace+"/"+pods[i].name] = podRunQueue(&h)
	}
	return out, nil
}

func podRunQueue(h *Hist) PodRunQueue {
	p := PodRunQueue{Samples: int64(h.Count())}
	if p.Samples > 0 {
		p.P99, _ = h.Quantile(0.99)
	}
	return p
}

// podUIDs are the distinct pod uids of refs, sorted (so the pods past
// bpf.PodSlots-1 are the same ones window after window).
func podUIDs(refs map[uint64]podRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.uid)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// withSlots sets each cgroup's slot from its pod's.
func (s *podSlots) withSlots(ids []bpf.PodCgroup, refs map[uint64]podRef) []bpf.PodCgroup {
	for i := range ids {
		sl, ok := s.byUID[refs[ids[i].ID].uid]
		if !ok {
			sl = bpf.OtherSlot
		}
		ids[i].Slot = sl
	}
	return ids
}

// sharedErr says how many pods have no histogram of their own.
func sharedErr(n int) error {
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d measured pods past the tracer's %d per-pod histograms share one: their own run-queue p99 is not measured", n, bpf.PodSlots-1)
}
