package irq

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"latencytier.io/latencytier/internal/settingid"
)

// idPrefix starts every IRQ setting ID (ID, defaultID).
var idPrefix = settingid.IRQ.Prefix()

// Number is the IRQ a per-IRQ setting ID names ("irq/24" → 24); false for
// any other ID (default_smp_affinity, a summary, another kind).
func Number(id string) (int, bool) {
	s, ok := strings.CutPrefix(id, idPrefix)
	if !ok || s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// SummaryID names the IRQs ns (distinct, any order) in one setting ID, in
// range form: "irq/24-31,40,42". One IRQ gets its own ID. An ID longer than
// max characters ends the list with "…+N" (N IRQs not listed), cut at a
// comma, so the status line's count says how many it stands for.
func SummaryID(ns []int, max int) string {
	ns = slices.Sorted(slices.Values(ns))
	if len(ns) == 1 {
		return ID(ns[0])
	}
	var parts []string
	var covered []int // IRQs listed up to and including parts[i]
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		p := strconv.Itoa(ns[i])
		if j > i {
			p += "-" + strconv.Itoa(ns[j])
		}
		parts = append(parts, p)
		covered = append(covered, j+1)
		i = j + 1
	}
	id := idPrefix + strings.Join(parts, ",")
	if utf8.RuneCountInString(id) <= max {
		return id
	}
	for k := len(parts) - 1; k > 0; k-- {
		cut := idPrefix + strings.Join(parts[:k], ",") + ",…+" + strconv.Itoa(len(ns)-covered[k-1])
		if utf8.RuneCountInString(cut) <= max {
			return cut
		}
	}
	return idPrefix + "…+" + strconv.Itoa(len(ns))
}

// SummaryNumbers are the IRQs a SummaryID lists (a single IRQ's ID too);
// false for an ID that is not one. A cut summary lists only the IRQs before
// its "…+N".
func SummaryNumbers(id string) ([]int, bool) {
	s, ok := strings.CutPrefix(id, idPrefix)
	if !ok || s == "" {
		return nil, false
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		if strings.HasPrefix(p, "…+") {
			break
		}
		lo, hi, isRange := strings.Cut(p, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, false
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, false
			}
		}
		for n := a; n <= b; n++ {
			out = append(out, n)
		}
	}
	return out, true
}
