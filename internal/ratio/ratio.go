// Package ratio is the one format and parse pair for the decimal ratios
// status carries (a pod's throttled share of CFS periods, a budget's
// throttledRatio, a rollout's allowed increase): the agent formats them,
// the controller parses and judges them. It imports nothing of the project.
package ratio

import (
	"math"
	"strconv"
	"strings"
)

// Format renders r the way status carries it: four decimals ("0.0123").
func Format(r float64) string { return strconv.FormatFloat(r, 'f', 4, 64) }

// Short renders r for a message with at most two decimals: 4.6, 0.22, 1.
func Short(r float64) string {
	s := strconv.FormatFloat(r, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Parse reads a decimal ratio; false when s does not parse or is NaN (which
// compares false with everything, so no judgement or order could use it).
func Parse(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}
