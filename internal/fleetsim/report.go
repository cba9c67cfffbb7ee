package fleetsim

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The goals (issue 14), on a 2-core machine, API server included.
const (
	goalNodes        = 1000
	goalApply        = 20 * time.Second
	goalCores        = 0.2
	goalRSS          = 200 << 20
	goalStatusPerMin = 20  // profile status at most once per 3 s
	goalLinear       = 1.5 // figure ratio over node ratio
)

// Report renders results (any order) as the docs/scale.md table and the
// one-line PASS/FAIL summary of the goals; plot, when set, is the SVG's
// file name to link.
func Report(results []Result, plot string) (markdown, summary string) {
	rs := slices.Clone(results)
	slices.SortFunc(rs, func(a, b Result) int { return a.Nodes - b.Nodes })
	var b strings.Builder
	b.WriteString("| nodes | all reported after create (s) | after spec change (s) | manager core (steady) | manager RSS MiB | manager req/min | agents req/min | profile status writes/min | agent status writes/min | manager writes, quiet window (last write of the change, s after it) |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.Incomplete != "" {
			fmt.Fprintf(&b, "| %d | incomplete: %s |||||||||\n", r.Nodes, r.Incomplete)
			continue
		}
		fmt.Fprintf(&b, "| %d | %.1f | %.1f | %s | %s | %.0f | %.0f | %.1f | %.0f | %.0f in %s (%.0f) |\n", r.Nodes,
			r.Apply.Seconds(), r.SpecChange.Seconds(), cores(r), rss(r), r.Steady.ManagerRequests, r.Steady.AgentRequests,
			r.Steady.ProfileStatusWrites, r.Steady.AgentStatusWrites, r.Quiet.ManagerWrites, r.Quiet.Length, r.QuietSettle.Seconds())
	}
	if plot != "" {
		fmt.Fprintf(&b, "\n![scale plot](%s)\n", plot)
	}
	return b.String(), goalSummary(rs)
}

func cores(r Result) string {
	if !r.ManagerMeasured {
		return "n/a (in process)"
	}
	return fmt.Sprintf("%.3f", r.Steady.ManagerCPU/60)
}

func rss(r Result) string {
	if !r.ManagerMeasured {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", float64(r.Steady.ManagerRSS)/(1<<20))
}

// goalSummary is one line flagging each goal PASS or FAIL (n/a when the runs
// cannot say). Goals stated for 1000 nodes are judged at the largest fleet
// run, which the line names; linearity compares the largest fleet with the
// smallest.
func goalSummary(sorted []Result) string {
	var parts []string
	var done []Result
	for _, r := range sorted {
		if r.Incomplete != "" {
			parts = append(parts, fmt.Sprintf("complete FAIL (N=%d %s)", r.Nodes, r.Incomplete))
			continue
		}
		done = append(done, r)
	}
	if len(done) == 0 {
		return "bench-scale: " + strings.Join(append(parts, "no fleet completed"), "; ")
	}
	sorted = done
	big, small := sorted[len(sorted)-1], sorted[0]
	flag := func(name string, ok bool, detail string) {
		verdict := "FAIL"
		if ok {
			verdict = "PASS"
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", name, verdict, detail))
	}
	at := fmt.Sprintf("N=%d", big.Nodes)
	if big.Nodes < goalNodes {
		at += fmt.Sprintf(", goal is for N=%d", goalNodes)
	}
	flag("apply<20s", big.Apply < goalApply, fmt.Sprintf("%.1fs at %s", big.Apply.Seconds(), at))
	flag("change<20s", big.SpecChange < goalApply, fmt.Sprintf("%.1fs", big.SpecChange.Seconds()))
	if big.ManagerMeasured {
		c := big.Steady.ManagerCPU / 60
		mib := float64(big.Steady.ManagerRSS) / (1 << 20)
		flag("manager<0.2core", c < goalCores, fmt.Sprintf("%.3f", c))
		flag("manager<200MiB", big.Steady.ManagerRSS < goalRSS, fmt.Sprintf("%.0f MiB", mib))
	} else {
		parts = append(parts, "manager cpu/rss n/a (in process)")
	}
	worst := 0.0
	for _, r := range sorted {
		worst = max(worst, r.Steady.ProfileStatusWrites)
	}
	flag("status-coalesced", worst <= goalStatusPerMin, fmt.Sprintf("max %.1f profile status writes/min", worst))
	quiet := 0.0
	for _, r := range sorted {
		quiet = max(quiet, r.Quiet.ManagerWrites)
	}
	flag("quiet-zero-writes", quiet == 0, fmt.Sprintf("max %.0f", quiet))
	if big.Nodes > small.Nodes {
		n := float64(big.Nodes) / float64(small.Nodes)
		ratio := func(a, b float64) float64 {
			if b <= 0 {
				return 0
			}
			return a / b
		}
		ra := ratio(big.Apply.Seconds(), small.Apply.Seconds())
		// Requests per minute are counts, and a healthy manager makes none
		// in the steady window at any size: one added to each keeps 0 -> 0
		// linear and 0 -> 500 not.
		rq := ratio(big.Steady.ManagerRequests+1, small.Steady.ManagerRequests+1)
		rc := ratio(big.Steady.ManagerCPU, small.Steady.ManagerCPU)
		ok := ra <= goalLinear*n && rq <= goalLinear*n && (!big.ManagerMeasured || rc <= goalLinear*n)
		flag("linear", ok, fmt.Sprintf("%d/%d nodes: apply x%.1f, manager req/min %.0f -> %.0f (x%.1f with one added to each), cpu x%.1f for x%.0f nodes",
			big.Nodes, small.Nodes, ra, small.Steady.ManagerRequests, big.Steady.ManagerRequests, rq, rc, n))
	} else {
		parts = append(parts, "linear n/a (one size)")
	}
	return "bench-scale: " + strings.Join(parts, "; ")
}
