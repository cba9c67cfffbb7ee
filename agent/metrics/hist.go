package metrics

import (
	"latencytier.io/latencytier/agent/measure"
)

// boundsNs are the le bounds of the run-queue histogram: runqlat's log2
// microsecond slots, 1µs to 2^20µs (~1.05s), in ns; +Inf is implicit.
var boundsNs = func() []uint64 {
	out := make([]uint64, 0, 21)
	for k := range 21 {
		out = append(out, 1000<<k)
	}
	return out
}()

// promBuckets converts the agent's log-linear histogram to Prometheus'
// cumulative buckets: for each upper bound, the samples of every fine
// bucket that lies wholly at or below it. The fine buckets nest inside the
// log2 µs slots, so no bucket straddles a bound; a sample of exactly a
// bound's value sits in the fine bucket that starts there and counts under
// the next bound (the BPF histogram cannot tell it from its neighbours).
// sum is estimated from the middle of each fine bucket: the histogram
// keeps no sum, and a bucket is at most 1/8 of its value wide.
func promBuckets(h *measure.Hist) (buckets map[float64]uint64, count uint64, sum float64) {
	buckets = make(map[float64]uint64, len(boundsNs))
	b := 0
	var cum uint64
	for i, c := range h.Slots {
		low, high := measure.SlotRange(i)
		// high is exclusive: the largest sample the bucket holds is high-1 ns.
		for b < len(boundsNs) && high-1 > boundsNs[b] {
			buckets[seconds(boundsNs[b])] = cum
			b++
		}
		cum += c
		sum += float64(c) * seconds(low+high) / 2
	}
	for ; b < len(boundsNs); b++ {
		buckets[seconds(boundsNs[b])] = cum
	}
	return buckets, cum, sum
}

// seconds converts ns to seconds.
func seconds(ns uint64) float64 { return float64(ns) / 1e9 }
