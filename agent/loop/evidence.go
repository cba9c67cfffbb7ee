package loop

import (
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/findings"
	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/snapshot"
	"latencytier.io/latencytier/agent/sysctl"
	mwindow "latencytier.io/latencytier/agent/window"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// evidence is status.baseline and status.current for the pass about to act
// on ln's spec (see v1alpha1.LatencyEvidence): the Meter's newest full
// window becomes current on every pass (reportDue decides whether it is
// written), and a current of another (action, revision) than the spec's
// moves to baseline. ln is not modified.
func (r *Reconciler) evidence(ln *v1alpha1.LatencyNode) (baseline, current *v1alpha1.LatencyEvidence) {
	baseline, current = ln.Status.Baseline.DeepCopy(), ln.Status.Current.DeepCopy()
	if !r.measuring(ln) {
		return baseline, current
	}
	if w := r.Meter.latest(); w != nil {
		r.published = w.res
		if w.full {
			current = evidenceOf(w)
		}
	}
	if current != nil && (evidenceKey{current.Action, current.Revision}) != specKey(ln.Spec) {
		baseline, current = current, nil
	}
	return baseline, current
}

// measuring says measurement runs for ln's spec.
func (r *Reconciler) measuring(ln *v1alpha1.LatencyNode) bool {
	return r.Meter != nil && r.Meter.running() && !disabled(ln.Spec.Tuning.Measurement)
}

// held tells the Meter what this pass left the node holding.
// node is the pass's snapshot; the Meter's windows decide from it too.
func (r *Reconciler) held(ln *v1alpha1.LatencyNode, node snapshot.Node, t v1alpha1.TuningSpec, pods []podcgroup.Pod, acted bool) {
	if r.Meter != nil {
		node = node.For(t)
		r.Meter.hold(specKey(ln.Spec), mwindow.Input{Tuning: t, Pods: pods, Node: &node}, acted)
	}
}

// measure copies the newest measurement window into st. The copies move
// every window; reportDue writes them when they move by moveFactor, else with
// the heartbeat.
func (r *Reconciler) measure(_ context.Context, ln *v1alpha1.LatencyNode, st *v1alpha1.LatencyNodeStatus) {
	r.passFindings = slices.Clone(st.Findings)
	if !r.measuring(ln) {
		for _, t := range []string{v1alpha1.NodeWithinBudget, v1alpha1.NodeRunQueueContention} {
			setCondition(st, metav1.Condition{Type: t, Status: metav1.ConditionUnknown,
				Reason: v1alpha1.ReasonNotMeasured, Message: "measurement is not running on this node"}, ln.Generation, metav1.Now())
		}
		st.PodBudgets = nil
		return
	}
	res := r.published
	if res == nil {
		return
	}
	st.Latency = res.Latency.DeepCopy()
	if st.Latency != nil && st.Latency.MeasuredAt != nil {
		// As the API server returns it, so the next pass compares equal.
		st.Latency.MeasuredAt = &metav1.Time{Time: st.Latency.MeasuredAt.UTC().Truncate(time.Second)}
	}
	st.RunQueueP99 = res.RunQueueP99
	st.Throttling = first(res.Throttling, bound.Throttling)
	st.ThrottledRatio = res.ThrottledRatio
	st.Findings = boundFindings(append(st.Findings, res.Findings...))
	if res.Budget.Type != "" {
		setCondition(st, res.Budget, ln.Generation, metav1.Now())
	}
	if res.Contention.Type != "" {
		setCondition(st, res.Contention, ln.Generation, metav1.Now())
	}
	st.PodBudgets = podBudgets(res.PodBudgets)
}

// podBudgets is status.podBudgets from a window's verdicts, bounded
// (findings.PodBudgetsStatus), each since as the API server returns it.
func podBudgets(rs []v1alpha1.PodBudgetResult) *v1alpha1.PodBudgetsStatus {
	st := findings.PodBudgetsStatus(rs)
	if st == nil {
		return nil
	}
	for i := range st.Pods {
		if s := st.Pods[i].Since; s != nil {
			st.Pods[i].Since = &metav1.Time{Time: s.UTC().Truncate(time.Second)}
		}
	}
	return st
}

// baseline is a Baseline pass: it writes nothing to the kernel (no probe
// that mounts, no journal) and only measures.
func (r *Reconciler) baseline(ctx context.Context, ln *v1alpha1.LatencyNode, node snapshot.Node) v1alpha1.LatencyNodeStatus {
	layout, _ := sysctl.Probe(r.Root, false)
	kf := facts.ReadOn(r.Root, node.Cmdline, layout.EEVDF, wasMounted(ln))
	pods, err := r.pods(ctx, measurementOnly(ln.Spec))
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the node's pods; measuring the node without them")
	}
	r.held(ln, node, measurementOnly(ln.Spec), pods, true)
	st := baselineStatus(ln.Status, ln, kf, metav1.Now())
	r.measure(ctx, ln, &st)
	return st
}

// measurementOnly is the tuning measured under Baseline and Revert: only
// the measurement settings, nothing the node does not hold.
func measurementOnly(s v1alpha1.LatencyNodeSpec) v1alpha1.TuningSpec {
	return v1alpha1.TuningSpec{Measurement: s.Tuning.Measurement}
}
