package metrics

import (
	"math"
	"math/rand/v2"
	"testing"

	"latencytier.io/latencytier/agent/measure"
)

// TestPromBucketsFromKnownSamples places samples on and around the bounds:
// a sample counts under every bound at or above it, except one of exactly a
// bound's value, which the histogram keeps with the bucket starting there.
func TestPromBucketsFromKnownSamples(t *testing.T) {
	var h measure.Hist
	for _, ns := range []uint64{0, 500, 999, 1000, 1500, 3000, 100_000, 100_000, 2_000_000_000} {
		h.Record(ns, 1)
	}
	h.Record(700_000, 3) // three at 700µs
	buckets, count, sum := promBuckets(&h)
	want := map[float64]uint64{
		1e-6: 3, // 0, 500, 999ns
		2e-6: 5, // + 1000 (exactly 1µs: the next bucket), 1500ns
		4e-6: 6, // + 3µs
		8e-6: 6, 16e-6: 6, 32e-6: 6, 64e-6: 6,
		128e-6: 8, // + 2×100µs
		256e-6: 8, 512e-6: 8,
		1024e-6: 11, // + 3×700µs
		2048e-6: 11, 4096e-6: 11, 8192e-6: 11, 16384e-6: 11, 32768e-6: 11, 65536e-6: 11,
		131072e-6: 11, 262144e-6: 11, 524288e-6: 11, 1048576e-6: 11,
		// 2s is only in +Inf (count)
	}
	if len(buckets) != len(want) {
		t.Errorf("%d buckets, want %d: %v", len(buckets), len(want), buckets)
	}
	for le, n := range want {
		if got, ok := buckets[le]; !ok || got != n {
			t.Errorf("le=%g: %d (present %v), want %d", le, got, ok, n)
		}
	}
	if count != 12 {
		t.Errorf("count %d, want 12", count)
	}
	// The sum is estimated from bucket middles; the buckets are at most
	// 1/8 of their value wide (exact below 0.5µs).
	exact := (500 + 999 + 1000 + 1500 + 3000 + 2*100_000 + 3*700_000 + 2_000_000_000) / 1e9
	if math.Abs(sum-exact) > exact/16 {
		t.Errorf("sum %gs, want within 1/16 of %gs", sum, exact)
	}
}

// TestPromBucketsAgreeWithRunqlatSlots: for any samples, the count at le =
// 2^(k+1)µs is the number of samples in runqlat's log2 slots 0..k (Log2,
// which the BPF comparison with libbpf-tools checks), and +Inf is all.
func TestPromBucketsAgreeWithRunqlatSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h measure.Hist
	for range 20000 {
		// log-uniform from 10ns to ~4s, so every slot gets some
		ns := uint64(math.Exp(rng.Float64()*math.Log(4e8)) * 10)
		h.Record(ns, uint64(1+rng.IntN(3)))
	}
	buckets, count, _ := promBuckets(&h)
	if count != h.Count() {
		t.Fatalf("count %d, histogram holds %d", count, h.Count())
	}
	log2 := h.Log2()
	var cum uint64
	for k := 0; k < 20; k++ {
		if k < len(log2) {
			cum += log2[k]
		}
		le := math.Ldexp(2e-6, k)
		if buckets[le] != cum {
			t.Errorf("le=%gs: %d, runqlat slots 0..%d hold %d", le, buckets[le], k, cum)
		}
	}
	var prev uint64
	for _, b := range boundsNs {
		n := buckets[seconds(b)]
		if n < prev {
			t.Errorf("le=%gs: %d below the previous bound's %d: not cumulative", seconds(b), n, prev)
		}
		prev = n
	}
}
