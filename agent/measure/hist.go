package measure

import (
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/measure/bpf"
	"latencytier.io/latencytier/api/v1alpha1"
)

// Hist is a log-linear run-queue latency histogram with the BPF program's
// layout: values in units of 1/16 us (62.5 ns), exact below 8 units, then 8
// sub-buckets per power of two. Every bucket lies inside one of runqlat's
// log2 microsecond slots, so the two tools can be compared bucket for bucket.
type Hist struct {
	Slots [bpf.Slots]uint64
	// MaxNs is the largest latency seen (0 when unknown).
	MaxNs uint64
}

const subs = 1 << bpf.SubBits

// unitsToNs is the smallest ns value that falls in unit u (the inverse of
// ns*2/125, rounded up: unit 1 starts at 63 ns).
func unitsToNs(u uint64) uint64 {
	return (u*bpf.UnitNumer + bpf.UnitDenom - 1) / bpf.UnitDenom
}

// slotOf returns the bucket of a latency in ns (the BPF program's slot()).
func slotOf(ns uint64) int {
	u := ns * bpf.UnitDenom / bpf.UnitNumer
	if u < subs {
		return int(u)
	}
	e := bits.Len64(u) - 1
	if e > bpf.MaxExp {
		return bpf.Slots - 1
	}
	return (e-bpf.SubBits+1)*subs + int((u>>(e-bpf.SubBits))&(subs-1))
}

// slotUnits returns the bucket's range in units, [low, high).
func slotUnits(i int) (low, high uint64) {
	if i < subs {
		return uint64(i), uint64(i) + 1
	}
	e := i/subs + bpf.SubBits - 1
	sub := uint64(i % subs)
	low = (subs + sub) << (e - bpf.SubBits)
	return low, low + 1<<(e-bpf.SubBits)
}

// SlotRange returns the bucket's latency range in ns, [low, high).
func SlotRange(i int) (low, high uint64) {
	l, h := slotUnits(i)
	return unitsToNs(l), unitsToNs(h)
}

// log2Slot is the runqlat (log2 usecs) slot bucket i falls into: slot k
// holds [2^k, 2^(k+1)) us, and slot 0 also holds 0 us.
func log2Slot(i int) int {
	l, _ := slotUnits(i)
	us := l >> 4
	if us < 2 {
		return 0
	}
	return bits.Len64(us) - 1
}

// log2SlotOfNs is the runqlat slot of a latency in ns.
func log2SlotOfNs(ns uint64) int {
	us := ns / 1000
	if us < 2 {
		return 0
	}
	return bits.Len64(us) - 1
}

// Add adds o into h.
func (h *Hist) Add(o *Hist) {
	for i := range h.Slots {
		h.Slots[i] += o.Slots[i]
	}
	h.MaxNs = max(h.MaxNs, o.MaxNs)
}

// Record counts n samples of latency ns.
func (h *Hist) Record(ns uint64, n uint64) {
	h.Slots[slotOf(ns)] += n
	h.MaxNs = max(h.MaxNs, ns)
}

// Count is the number of samples.
func (h *Hist) Count() uint64 {
	var n uint64
	for _, c := range h.Slots {
		n += c
	}
	return n
}

// Quantile returns the q-quantile (0 < q <= 1), interpolated inside its
// bucket, and the bucket index; -1 when the histogram is empty.
func (h *Hist) Quantile(q float64) (time.Duration, int) {
	n := h.Count()
	if n == 0 {
		return 0, -1
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	var cum uint64
	for i, c := range h.Slots {
		if c == 0 || cum+c < rank {
			cum += c
			continue
		}
		low, high := SlotRange(i)
		// Place the rank-th sample inside [low, high) as if evenly spread.
		frac := (float64(rank-cum) - 0.5) / float64(c)
		ns := float64(low) + frac*float64(high-low)
		return time.Duration(ns), i
	}
	return 0, -1
}

// Max is the largest latency: the measured one, or the top of the highest
// non-empty bucket when the kernel's max was not available.
func (h *Hist) Max() time.Duration {
	for i := len(h.Slots) - 1; i >= 0; i-- {
		if h.Slots[i] == 0 {
			continue
		}
		low, high := SlotRange(i)
		if h.MaxNs >= low {
			return time.Duration(h.MaxNs)
		}
		return time.Duration(high)
	}
	return 0
}

// Log2 returns the histogram as runqlat prints it: counts per log2 usecs slot.
func (h *Hist) Log2() []uint64 {
	var out []uint64
	for i, c := range h.Slots {
		if c == 0 {
			continue
		}
		s := log2Slot(i)
		for len(out) <= s {
			out = append(out, 0)
		}
		out[s] += c
	}
	return out
}

// maxBuckets bounds the compact histogram in status.
const maxBuckets = 64

// Compact returns the non-empty buckets, merging sub-buckets (8 → 4 → 2 → 1
// per power of two) until at most maxBuckets remain. le is each bucket's
// upper bound.
func (h *Hist) Compact() []v1alpha1.LatencyBucket {
	for group := 1; group <= subs; group *= 2 {
		out := h.grouped(group)
		if len(out) <= maxBuckets || group == subs {
			return out
		}
	}
	return nil
}

func (h *Hist) grouped(group int) []v1alpha1.LatencyBucket {
	var out []v1alpha1.LatencyBucket
	for start := 0; start < len(h.Slots); start += group {
		var n uint64
		for _, c := range h.Slots[start : start+group] {
			n += c
		}
		if n == 0 {
			continue
		}
		_, high := SlotRange(start + group - 1)
		out = append(out, v1alpha1.LatencyBucket{
			Le:    metav1.Duration{Duration: time.Duration(high)},
			Count: int64(n),
		})
	}
	return out
}

// classLatency summarises a histogram for status.
func classLatency(class string, h *Hist) v1alpha1.ClassLatency {
	cl := v1alpha1.ClassLatency{Class: class, Samples: int64(h.Count())}
	if cl.Samples == 0 {
		return cl
	}
	dur := func(q float64) *metav1.Duration {
		d, _ := h.Quantile(q)
		return &metav1.Duration{Duration: d}
	}
	cl.P50, cl.P99, cl.P999 = dur(0.50), dur(0.99), dur(0.999)
	cl.Max = &metav1.Duration{Duration: h.Max()}
	cl.Buckets = h.Compact()
	return cl
}

// PrintLog2 prints a log2 histogram exactly as libbpf-tools' print_log2_hist.
func PrintLog2(w io.Writer, vals []uint64, unit string) {
	idxMax := -1
	var valMax uint64
	for i, v := range vals {
		if v > 0 {
			idxMax = i
		}
		valMax = max(valMax, v)
	}
	if idxMax < 0 {
		return
	}
	pad, width, stars := 5, 19, 40
	if idxMax > 32 {
		pad, width, stars = 15, 29, 20
	}
	fmt.Fprintf(w, "%*s%-*s : count    distribution\n", pad, "", width, unit)
	colw := 10
	if idxMax > 32 {
		colw = 20
	}
	for i := 0; i <= idxMax; i++ {
		low := (uint64(1) << (i + 1)) >> 1
		high := (uint64(1) << (i + 1)) - 1
		if low == high {
			low--
		}
		fmt.Fprintf(w, "%*d -> %-*d : %-8d |%s|\n", colw, low, colw, high, vals[i], starBar(vals[i], valMax, stars))
	}
}

func starBar(v, vmax uint64, width int) string {
	if vmax == 0 {
		return strings.Repeat(" ", width)
	}
	n := int(min(v, vmax) * uint64(width) / vmax)
	return strings.Repeat("*", n) + strings.Repeat(" ", width-n)
}
