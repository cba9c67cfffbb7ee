package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/printable"
)

// table writes tab-separated rows aligned like kubectl get.
type table struct{ w *tabwriter.Writer }

func newTable(out io.Writer) *table {
	return &table{w: tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)}
}

// row writes one row; every cell is escaped (safe), so a value holding a
// tab, a newline or a terminal escape cannot shift columns or forge rows.
func (t *table) row(cells ...string) {
	esc := make([]string, len(cells))
	for i, c := range cells {
		esc[i] = safe(c)
	}
	fmt.Fprintln(t.w, strings.Join(esc, "\t"))
}
func (t *table) flush() error { return t.w.Flush() }

// header writes the header row unless --no-headers (skip).
func (t *table) header(skip bool, cells ...string) {
	if !skip {
		t.row(cells...)
	}
}

// dur prints a duration the way the API stores it, "-" when unmeasured.
func dur(d *metav1.Duration) string {
	if d == nil {
		return "-"
	}
	return d.Duration.String()
}

// safe escapes a string from the API for the terminal: status is written
// by agents and quotes what tenants named (thread names, cgroups), so
// control characters print as \xNN, never as themselves.
func safe(s string) string { return printable.String(s) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// condition prints a condition's status, "-" when the node has not set it.
func condition(conds []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return string(c.Status)
	}
	return "-"
}

// before and after are the node's own run-queue p99 before and after its
// current (action, revision): the agent's baseline and current windows;
// without a current window, the latest measurement stands for after.
func before(n *v1alpha1.LatencyNode) *metav1.Duration {
	if n.Status.Baseline == nil {
		return nil
	}
	return n.Status.Baseline.RunQueue.P99
}

func after(n *v1alpha1.LatencyNode) *metav1.Duration {
	if n.Status.Current != nil && n.Status.Current.RunQueue.P99 != nil {
		return n.Status.Current.RunQueue.P99
	}
	return n.Status.RunQueueP99
}

// change is after/before as a factor ("0.25×"), "-" without both.
func change(n *v1alpha1.LatencyNode) string {
	b, a := before(n), after(n)
	if b == nil || a == nil || b.Duration <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", float64(a.Duration)/float64(b.Duration))
}

// verdicts are the node verdicts of one profile's rollout status: the
// controller keeps them there (LatencyNode status is the agent's alone),
// listing each node that is Regressed or Inconclusive and counting the rest.
type verdicts struct{ ro *v1alpha1.RolloutStatus }

func verdictsOf(p *v1alpha1.LatencyProfile) verdicts {
	if p == nil {
		return verdicts{}
	}
	return verdicts{p.Status.Rollout}
}

// entry is n's line in the profile's verdicts, nil when none.
func (vs verdicts) entry(n *v1alpha1.LatencyNode) *v1alpha1.NodeVerdictStatus {
	if vs.ro == nil {
		return nil
	}
	for i := range vs.ro.Verdicts {
		if vs.ro.Verdicts[i].Node == n.Name {
			return &vs.ro.Verdicts[i]
		}
	}
	return nil
}

// verdict is n's verdict in the API's words (v1alpha1.Verdicts): the
// listed one; for a node with a window under the revision it holds, when
// the list is whole and some node passed (the controller lists only the
// nodes that did not pass), the passing verdict the counts leave
// (Improved when no node is Unchanged, and the reverse), or both as
// "Improved|Unchanged" when they cannot tell; else "-".
func (vs verdicts) verdict(n *v1alpha1.LatencyNode) string {
	if e := vs.entry(n); e != nil {
		return e.Verdict
	}
	ro, cur := vs.ro, n.Status.Current
	if ro == nil || ro.VerdictsOmitted > 0 || ro.Improved+ro.Unchanged == 0 ||
		cur == nil || cur.Action != v1alpha1.ActionApply || n.Spec.Action != v1alpha1.ActionApply || cur.Revision != n.Spec.Revision {
		return "-"
	}
	switch {
	case ro.Unchanged == 0:
		return v1alpha1.VerdictImproved
	case ro.Improved == 0:
		return v1alpha1.VerdictUnchanged
	}
	return strings.Join(v1alpha1.PassingVerdicts, "|")
}

// nodeState summarises a node in one word, worst reason first.
func nodeState(n *v1alpha1.LatencyNode, vs verdicts) string {
	switch {
	case n.Spec.Action == v1alpha1.ActionRevert:
		if condition(n.Status.Conditions, v1alpha1.NodeReverted) == "True" {
			return "Reverted"
		}
		return "Reverting"
	case vs.verdict(n) == v1alpha1.VerdictRegressed:
		return v1alpha1.VerdictRegressed
	case n.Status.StaleAt(time.Now()):
		// Silent for v1alpha1.StaleHeartbeats heartbeats: what it last said may not hold.
		return "Stale"
	case failedSettings(n) > 0 || condition(n.Status.Conditions, v1alpha1.NodeApplied) == "False":
		return "Degraded"
	case condition(n.Status.Conditions, v1alpha1.NodeWithinBudget) == "False":
		return "OutsideBudget"
	case condition(n.Status.Conditions, v1alpha1.NodeDrifted) == "True":
		return "Drifted"
	case n.Spec.Action == v1alpha1.ActionBaseline:
		return "Baseline"
	case condition(n.Status.Conditions, v1alpha1.NodeApplied) == "True":
		return "Applied"
	}
	return "Pending"
}

// stateRank orders states worst first.
var stateRank = map[string]int{
	v1alpha1.VerdictRegressed: 0, "Stale": 1, "Degraded": 2, "OutsideBudget": 3, "Drifted": 4,
	"Pending": 5, "Reverting": 6, "Baseline": 7, "Applied": 8, "Reverted": 9,
}

// failedSettings counts settings the node could not hold.
func failedSettings(n *v1alpha1.LatencyNode) int {
	k := 0
	for _, s := range n.Status.Settings {
		if s.State == v1alpha1.SettingFailed || s.State == v1alpha1.SettingInvalid || s.State == v1alpha1.SettingConflict ||
			s.State == v1alpha1.SettingFallback {
			k += max(1, int(s.Count)) // a summarised IRQ line counts its IRQs
		}
	}
	return k
}

// worstFirst sorts nodes by state, then by p99 (highest first), then name.
func worstFirst(nodes []v1alpha1.LatencyNode, vs verdicts) {
	sort.SliceStable(nodes, func(i, j int) bool {
		ri, rj := stateRank[nodeState(&nodes[i], vs)], stateRank[nodeState(&nodes[j], vs)]
		if ri != rj {
			return ri < rj
		}
		if pi, pj := p99(after(&nodes[i])), p99(after(&nodes[j])); pi != pj {
			return pi > pj
		}
		return nodes[i].Name < nodes[j].Name
	})
}

// p99 orders unmeasured nodes after measured ones.
func p99(d *metav1.Duration) int64 {
	if d == nil {
		return -1
	}
	return int64(d.Duration)
}

// offenderWords says what an offender class is, for a person.
var offenderWords = map[v1alpha1.OffenderClass]string{
	v1alpha1.OffenderSamePod:        "its own pod",
	v1alpha1.OffenderMeasuredPod:    "measured pod",
	v1alpha1.OffenderPod:            "pod",
	v1alpha1.OffenderSystemService:  "system service",
	v1alpha1.OffenderKernelThread:   "kernel thread",
	v1alpha1.OffenderInterrupt:      "interrupts",
	v1alpha1.OffenderIdle:           "idle exit",
	v1alpha1.OffenderSelfThrottling: "its own CPU quota",
	v1alpha1.OffenderUnattributed:   "unattributed",
	v1alpha1.OffenderOther:          "other",
}

// podWait is one measured pod's line: "checkout/gateway-7f waited 38ms per
// second: 71 % batch/nightly-tar (pod), 20 % ksoftirqd/1 (kernel thread),
// 9 % idle exit". Names come from tenants (pods, cgroups, threads): escaped.
func podWait(w *v1alpha1.PodWait) string {
	var parts []string
	for _, o := range w.Offenders {
		what := offenderWords[o.Class]
		if what == "" {
			what = string(o.Class)
		}
		if o.Name != "" {
			what = fmt.Sprintf("%s (%s)", o.Name, what)
		}
		parts = append(parts, fmt.Sprintf("%d %% %s", o.SharePercent, what))
	}
	line := fmt.Sprintf("%s/%s waited %s per second", w.Namespace, w.Name, dur(w.WaitPerSecond))
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, ", ")
	}
	return safe(line)
}
