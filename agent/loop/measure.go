package loop

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// defaultMeasureInterval applies when the profile names none.
const defaultMeasureInterval = 30 * time.Second

// Measurement is one measurement interval's result, copied into status.
type Measurement struct {
	Latency        *v1alpha1.LatencyStatus
	RunQueueP99    *metav1.Duration
	Throttling     []v1alpha1.PodThrottling
	ThrottledRatio string
	Findings       []v1alpha1.Finding
	// Budget is the WithinBudget condition.
	Budget metav1.Condition
}

// MeasureFunc measures the node over the last interval.
//
// INTEGRATION POINT (measurement helper): agent/measure's Measurer is wired
// in here through an adapter once it exists (see Run's caller in agent.go).
type MeasureFunc func(ctx context.Context, t v1alpha1.TuningSpec, pods []podcgroup.Pod) (*Measurement, error)

// measure runs Measure at most once per interval and copies the last result
// into st, so status changes only when a new measurement arrives.
func (r *Reconciler) measure(ctx context.Context, ln *v1alpha1.LatencyNode, pods []podcgroup.Pod, st *v1alpha1.LatencyNodeStatus) {
	m := ln.Spec.Tuning.Measurement
	if r.Measure == nil || (m != nil && m.Source == v1alpha1.MeasurementDisabled) {
		setCondition(st, metav1.Condition{Type: v1alpha1.NodeWithinBudget, Status: metav1.ConditionUnknown,
			Reason: v1alpha1.ReasonNotMeasured, Message: "measurement is not running on this node"}, ln.Generation, metav1.Now())
		return
	}
	interval := defaultMeasureInterval
	if m != nil && m.Interval != nil && m.Interval.Duration > 0 {
		interval = m.Interval.Duration
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// 10% slack: a resync equal to the interval must not skip every other
	// window because the requeue fired a little early.
	if time.Since(r.lastMeasure) >= interval-interval/10 {
		res, err := r.Measure(ctx, ln.Spec.Tuning, pods)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to measure")
		} else {
			r.measured = res
		}
		r.lastMeasure = time.Now()
	}
	if r.measured == nil {
		return
	}
	st.Latency = r.measured.Latency
	st.RunQueueP99 = r.measured.RunQueueP99
	st.Throttling = first(r.measured.Throttling, bound.Throttling)
	st.ThrottledRatio = r.measured.ThrottledRatio
	st.Findings = boundFindings(append(st.Findings, r.measured.Findings...))
	if r.measured.Budget.Type != "" {
		setCondition(st, r.measured.Budget, ln.Generation, metav1.Now())
	}
}
