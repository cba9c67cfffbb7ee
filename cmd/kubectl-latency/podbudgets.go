package main

import (
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// explainPodBudgets prints the measured pods' verdicts against the
// profile's measurement.budgets (nothing when the profile sets none): the
// budgets, one line per pod outside its budget naming where its wait
// went (wake-up to run, queueing behind others, throttled) and its own
// run-queue p99, then every listed pod as a table.
func explainPodBudgets(out io.Writer, n *v1alpha1.LatencyNode) error {
	var budgets []v1alpha1.PodBudget
	if m := n.Spec.Tuning.Measurement; m != nil {
		budgets = m.Budgets
	}
	st := n.Status.PodBudgets
	if len(budgets) == 0 && st == nil {
		return nil
	}
	section(out, "Pod budgets (measurement.budgets, the first that matches a pod applies)")
	limits := map[string]v1alpha1.PodBudget{}
	for _, b := range budgets {
		limits[b.Name] = b
		fmt.Fprintf(out, "  %s: wait %s a second, run-queue p99 %s, throttled ratio %s\n", safe(b.Name), dur(b.WaitPerSecond),
			dur(b.RunQueueP99), ptrOrDash(b.ThrottledRatio))
	}
	if st == nil {
		fmt.Fprintln(out, "  no measured pod judged yet")
		return nil
	}
	fmt.Fprintf(out, "  %d outside, %d unknown, %d within\n", st.Outside, st.Unknown, st.Within)
	for _, p := range st.Pods {
		if p.Verdict == v1alpha1.PodOutsideBudget {
			fmt.Fprintf(out, "  OUTSIDE %s/%s (budget %s, %s): %s\n", safe(p.Namespace), safe(p.Name), safe(p.Budget),
				safe(orDash(p.Reason)), breakdown(p, limits[p.Budget]))
		}
	}
	t := newTable(out)
	t.row("  POD", "BUDGET", "VERDICT", "REASON", "SINCE", "WAIT/S", "WAKE-UP", "BEHIND-OTHERS", "BEHIND-OWN", "THROTTLED", "UNSPLIT",
		"P99", "WAITS", "THROTTLED-RATIO")
	for _, p := range st.Pods {
		t.row("  "+safe(p.Namespace+"/"+p.Name), safe(p.Budget), safe(string(p.Verdict)), safe(orDash(p.Reason)), since(p.Since),
			dur(p.WaitPerSecond), dur(p.WakeUpPerSecond), dur(p.QueuedBehindOthersPerSecond), dur(p.QueuedBehindOwnPerSecond),
			dur(p.ThrottledPerSecond), dur(unsplit(p)), dur(p.RunQueueP99), samples(p), safe(orDash(p.ThrottledRatio)))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if st.Omitted > 0 {
		fmt.Fprintf(out, "  (+%d pods omitted from status)\n", st.Omitted)
	}
	return nil
}

// breakdown says where an Outside pod's wait went, against its budget.
func breakdown(p v1alpha1.PodBudgetResult, b v1alpha1.PodBudget) string {
	s := "wait " + dur(p.WaitPerSecond) + " a second"
	if b.WaitPerSecond != nil {
		s += " (budget " + b.WaitPerSecond.Duration.String() + ")"
	}
	if p.WaitPerSecond != nil {
		s += fmt.Sprintf(": wake-up to run %s, queueing behind others %s, behind its own tasks %s, throttled %s, unsplit %s",
			dur(p.WakeUpPerSecond), dur(p.QueuedBehindOthersPerSecond), dur(p.QueuedBehindOwnPerSecond),
			dur(p.ThrottledPerSecond), dur(unsplit(p)))
	}
	s += "; run-queue p99 " + dur(p.RunQueueP99)
	if p.RunQueueP99 != nil {
		s += fmt.Sprintf(" of %d waits", p.RunQueueSamples)
	}
	if b.RunQueueP99 != nil {
		s += " (budget " + b.RunQueueP99.Duration.String() + ")"
	}
	s += "; throttled ratio " + orDash(p.ThrottledRatio)
	if b.ThrottledRatio != nil {
		s += " (budget " + *b.ThrottledRatio + ")"
	}
	return s
}

// unsplit is the part of the wait the tracer could not split (the wait
// less its parts); nil without a wait.
func unsplit(p v1alpha1.PodBudgetResult) *metav1.Duration {
	if p.WaitPerSecond == nil {
		return nil
	}
	rest := p.WaitPerSecond.Duration
	for _, d := range []*metav1.Duration{p.WakeUpPerSecond, p.QueuedBehindOthersPerSecond, p.QueuedBehindOwnPerSecond, p.ThrottledPerSecond} {
		if d != nil {
			rest -= d.Duration
		}
	}
	return &metav1.Duration{Duration: max(rest, 0)}
}

func since(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func ptrOrDash(s *string) string {
	if s == nil {
		return "-"
	}
	return safe(*s)
}

// samples is how many waits a pod's run-queue p99 is over ("-" without
// one).
func samples(p v1alpha1.PodBudgetResult) string {
	if p.RunQueueP99 == nil {
		return "-"
	}
	return fmt.Sprint(p.RunQueueSamples)
}
