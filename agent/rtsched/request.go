package rtsched

import (
	"fmt"
	"slices"
	"strings"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// maxAnnotation bounds the annotation value: "fifo:99" is the longest valid.
const maxAnnotation = 7

// parseRequest parses the pod's latencytier.io/sched-policy annotation
// strictly: "fifo:<1-99>" or "rr:<1-99>", lowercase, no spaces, no sign, no
// leading zero. The value is the pod owner's; nothing in it reaches a path.
func parseRequest(s string) (Value, error) {
	if len(s) > maxAnnotation {
		return Value{}, fmt.Errorf("%s %q is longer than %d characters; want fifo:<1-99> or rr:<1-99>", v1alpha1.SchedPolicyAnnotation, s[:maxAnnotation]+"...", maxAnnotation)
	}
	v, err := parseValue(s)
	if err != nil || !v.isRealtime() || strings.HasPrefix(s[strings.IndexByte(s, ':')+1:], "0") {
		return Value{}, fmt.Errorf("%s %q is not fifo:<1-99> or rr:<1-99>", v1alpha1.SchedPolicyAnnotation, s)
	}
	return v, nil
}

// Refusal is why a pod's request is not granted, and which profile field
// (or the annotation itself) decided it.
type Refusal struct {
	Field   string
	Message string
	// Invalid is set when the annotation itself is malformed.
	Invalid bool
}

// Profile fields named in refusals.
const (
	FieldPolicies    = "realtime.policies"
	FieldMaxPriority = "realtime.maxPriority"
	FieldRTRuntime   = "scheduler.rtRuntime"
)

// Check decides a request against the profile's realtime grant beyond the
// namespace (which the caller matched): the annotation must parse, the
// policy be among realtime.policies, the priority at most
// realtime.maxPriority (refused, never clamped), and the profile must not
// turn RT throttling off without isolated CPUs (field note 003: a spinning
// RT thread then starves every other task on its CPU; the CRD rejects such a
// profile, the agent refuses it again).
func Check(t v1alpha1.TuningSpec, annotation string) (Value, *Refusal) {
	v, err := parseRequest(annotation)
	if err != nil {
		return Value{}, &Refusal{Field: v1alpha1.SchedPolicyAnnotation, Message: err.Error(), Invalid: true}
	}
	rt := t.Realtime
	policies := rt.Policies
	if len(policies) == 0 {
		policies = []v1alpha1.RealtimePolicy{v1alpha1.RealtimeFIFO, v1alpha1.RealtimeRR}
	}
	if !slices.Contains(policies, v1alpha1.RealtimePolicy(strings.ToUpper(v.Policy))) {
		return Value{}, &Refusal{Field: FieldPolicies, Message: fmt.Sprintf("%s %s is not among realtime.policies %v", v1alpha1.SchedPolicyAnnotation, annotation, policies)}
	}
	maxPrio := int(rt.MaxPriority)
	if maxPrio == 0 {
		maxPrio = 50
	}
	if v.N > maxPrio {
		return Value{}, &Refusal{Field: FieldMaxPriority, Message: fmt.Sprintf("%s %s asks for priority %d, above realtime.maxPriority %d", v1alpha1.SchedPolicyAnnotation, annotation, v.N, maxPrio)}
	}
	if t.Scheduler != nil && t.Scheduler.RTRuntime != nil && *t.Scheduler.RTRuntime == "Unlimited" && (t.CPUs == nil || t.CPUs.Isolated == nil) {
		return Value{}, &Refusal{Field: FieldRTRuntime, Message: "the profile sets scheduler.rtRuntime Unlimited without cpus.isolated: with RT throttling off a spinning real-time thread starves every other task on its CPU (field note 003)"}
	}
	return v, nil
}
