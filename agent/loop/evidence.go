package loop

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// evidence is status.baseline and status.current for the pass about to act
// on ln's spec (see v1alpha1.LatencyEvidence): the Meter's newest full
// window becomes current, and a current of another (action, revision) than
// the spec's moves to baseline. ln is not modified.
func (r *Reconciler) evidence(ln *v1alpha1.LatencyNode) (baseline, current *v1alpha1.LatencyEvidence) {
	baseline, current = ln.Status.Baseline.DeepCopy(), ln.Status.Current.DeepCopy()
	if !r.measuring(ln) {
		return baseline, current
	}
	if w := r.Meter.latest(); w != nil && w.seq > r.folded {
		r.folded = w.seq
		if measure.ChangedMaterially(r.published, w.res) {
			r.published = w.res
		}
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
func (r *Reconciler) held(ln *v1alpha1.LatencyNode, t v1alpha1.TuningSpec, pods []podcgroup.Pod, acted bool) {
	if r.Meter != nil {
		r.Meter.hold(specKey(ln.Spec), measure.Input{Tuning: t, Pods: pods}, acted)
	}
}

// measure copies the last published measurement into st. The Meter
// republishes a window only when it differs materially from the last one
// (measure.ChangedMaterially), so these fields alone never cause a write per
// window; status.current does, once per interval.
func (r *Reconciler) measure(_ context.Context, ln *v1alpha1.LatencyNode, st *v1alpha1.LatencyNodeStatus) {
	if !r.measuring(ln) {
		setCondition(st, metav1.Condition{Type: v1alpha1.NodeWithinBudget, Status: metav1.ConditionUnknown,
			Reason: v1alpha1.ReasonNotMeasured, Message: "measurement is not running on this node"}, ln.Generation, metav1.Now())
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
}
