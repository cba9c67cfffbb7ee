package loop

import (
	"slices"

	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/irq"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// SummariseIRQs folds the per-IRQ affinity settings of rs into one line per
// (desired, actual, state, message, owner): setting names the IRQs in range form
// (irq.SummaryID, within the setting's length limit) and count how many the
// line stands for. A group of one keeps its IRQ's own ID and no count, and
// every other setting (default_smp_affinity included) is left as it is. A
// node with 256 movable IRQs all steered the same way lists one line, not
// 256. The order of rs is kept (each summary where its first IRQ was); rs is
// not modified. IRQs irqbalance placed within the reserved CPUs are shown
// without the CPU it picked.
func SummariseIRQs(rs []v1alpha1.SettingResult) []v1alpha1.SettingResult {
	type group struct {
		first int // index in out
		irqs  []int
	}
	type key struct{ desired, actual, state, message, owner string }
	groups := map[key]*group{}
	out := make([]v1alpha1.SettingResult, 0, len(rs))
	for _, r := range rs {
		if irq.PlacedByIRQBalance(r) {
			// The CPU irqbalance picked this pass is not shown: one line
			// for all it placed, and no status write when it moves one.
			r.Actual = ""
		}
		n, ok := irq.Number(r.Setting)
		if !ok || r.Count > 1 {
			out = append(out, r)
			continue
		}
		k := key{r.Desired, r.Actual, string(r.State), r.Message, r.Owner}
		if g := groups[k]; g != nil {
			g.irqs = append(g.irqs, n)
			continue
		}
		groups[k] = &group{first: len(out), irqs: []int{n}}
		out = append(out, r)
	}
	for _, g := range groups {
		g.irqs = slices.Compact(slices.Sorted(slices.Values(g.irqs)))
		if len(g.irqs) < 2 {
			continue
		}
		s := &out[g.first]
		s.Setting, s.Count = irq.SummaryID(g.irqs, bound.SettingValue), int32(len(g.irqs))
	}
	return out
}

// weight is how many settings a status line stands for (a summary's count).
func weight(s v1alpha1.SettingResult) int {
	return max(1, int(s.Count))
}

// settingCount is how many settings the lines stand for.
func settingCount(rs []v1alpha1.SettingResult) int {
	n := 0
	for _, s := range rs {
		n += weight(s)
	}
	return n
}
