package measure

import (
	"testing"
	"time"

	"latencytier.io/latencytier/agent/measure/bpf"
)

func TestSlotOfAndRange(t *testing.T) {
	for _, ns := range []uint64{0, 1, 62, 63, 500, 999, 1000, 1001, 1999, 2000, 2047, 3999, 4000,
		15_999, 16_000, 123_456, 1_000_000, 1_048_575_999, 60_000_000_000, 500_000_000_000} {
		i := slotOf(ns)
		low, high := SlotRange(i)
		if ns < low || ns >= high {
			t.Errorf("ns %d in slot %d [%d, %d)", ns, i, low, high)
		}
		if got, want := log2Slot(i), log2SlotOfNs(ns); got != want {
			t.Errorf("ns %d: bucket %d maps to runqlat slot %d, the value itself to %d", ns, i, got, want)
		}
	}
}

func TestSlotsTileWithoutGapsAndRespectLog2Boundaries(t *testing.T) {
	prevHigh := uint64(0)
	for i := 0; i < bpf.Slots; i++ {
		low, high := SlotRange(i)
		if low != prevHigh {
			t.Fatalf("slot %d starts at %d, previous ended at %d", i, low, prevHigh)
		}
		// Both ends of the bucket belong to the same runqlat slot.
		if log2SlotOfNs(low) != log2SlotOfNs(high-1) {
			t.Fatalf("slot %d [%d, %d) straddles runqlat slots %d and %d", i, low, high, log2SlotOfNs(low), log2SlotOfNs(high-1))
		}
		prevHigh = high
	}
	if slotOf(1<<62) != bpf.Slots-1 {
		t.Errorf("overflow does not land in the last slot")
	}
}

func TestQuantile(t *testing.T) {
	var h Hist
	h.Record(1_000, 50)    // 1 us
	h.Record(10_000, 49)   // 10 us
	h.Record(5_000_000, 1) // 5 ms
	for _, tc := range []struct {
		q        float64
		min, max time.Duration
	}{
		{0.50, 1000 * time.Nanosecond, 1125 * time.Nanosecond},
		{0.51, 9 * time.Microsecond, 11 * time.Microsecond},
		{0.99, 9 * time.Microsecond, 11 * time.Microsecond},
		{1.00, 4500 * time.Microsecond, 5500 * time.Microsecond},
	} {
		got, _ := h.Quantile(tc.q)
		if got < tc.min || got > tc.max {
			t.Errorf("q%.2f = %s, want in [%s, %s]", tc.q, got, tc.min, tc.max)
		}
	}
	if h.Max() != 5*time.Millisecond {
		t.Errorf("max %s, want 5ms", h.Max())
	}
	var empty Hist
	if _, i := empty.Quantile(0.5); i != -1 {
		t.Errorf("empty histogram has quantile bucket %d", i)
	}
}

func TestMaxFallsBackToBucketTop(t *testing.T) {
	var h Hist
	h.Slots[slotOf(3_000_000)] = 1 // max unknown (reset race)
	_, high := SlotRange(slotOf(3_000_000))
	if h.Max() != time.Duration(high) {
		t.Errorf("max %s, want bucket top %s", h.Max(), time.Duration(high))
	}
}

func TestLog2MatchesRunqlatShape(t *testing.T) {
	var h Hist
	h.Record(500, 3)     // 0 us -> slot 0
	h.Record(1_500, 2)   // 1 us -> slot 0
	h.Record(2_500, 4)   // 2 us -> slot 1
	h.Record(100_000, 1) // 100 us -> slot 6
	want := []uint64{5, 4, 0, 0, 0, 0, 1}
	got := h.Log2()
	if len(got) != len(want) {
		t.Fatalf("log2 %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("log2 %v, want %v", got, want)
		}
	}
}

func TestCompactBoundsAndKeepsCounts(t *testing.T) {
	var h Hist
	for i := range h.Slots {
		h.Slots[i] = uint64(i + 1) // every bucket non-empty
	}
	total := h.Count()
	b := h.Compact()
	if len(b) > maxBuckets {
		t.Fatalf("%d buckets, want at most %d", len(b), maxBuckets)
	}
	var n int64
	for i, x := range b {
		n += x.Count
		if i > 0 && x.Le.Duration <= b[i-1].Le.Duration {
			t.Fatalf("bucket bounds not increasing at %d", i)
		}
	}
	if uint64(n) != total {
		t.Errorf("compacted count %d, want %d", n, total)
	}

	var sparse Hist
	sparse.Record(1_000, 1)
	sparse.Record(2_000_000, 2)
	if got := sparse.Compact(); len(got) != 2 || got[1].Count != 2 {
		t.Errorf("sparse histogram compacted to %+v", got)
	}
}
