package rtsched

import (
	"k8s.io/utils/cpuset"

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
	FieldIsolated    = "cpus.isolated"
)

// Check decides a request against the profile's realtime grant beyond the
// namespace (which the caller matched): the profile must isolate CPUs (a
// real-time thread is granted only on them; the CRD rejects realtime
// without cpus.isolated, the agent refuses it again), the annotation must
// parse, the policy be among realtime.policies, the priority at most
// realtime.maxPriority (refused, never clamped) and below the kernel's
// threaded IRQ handlers unless realtime.priorityCeiling is AboveIRQThreads.
// Every refusal is the pod's: Refused, never a node failure.
func Check(t v1alpha1.TuningSpec, annotation string) (Value, *Refusal) {
	v, err := parseRequest(annotation)
	if err != nil {
		return Value{}, &Refusal{Field: v1alpha1.SchedPolicyAnnotation, Message: err.Error(), Invalid: true}
	}
	if t.CPUs == nil || t.CPUs.Isolated == nil {
		return Value{}, &Refusal{Field: FieldIsolated, Message: "the profile sets no cpus.isolated: a real-time thread is granted only on isolated CPUs, where it cannot starve kubelet and the IRQ threads"}
	}
	rt := t.Realtime
	policies := rt.Policies
	if len(policies) == 0 {
		policies = []v1alpha1.RealtimePolicy{v1alpha1.RealtimeFIFO, v1alpha1.RealtimeRR}
	}
	if !slices.Contains(policies, v1alpha1.RealtimePolicy(strings.ToUpper(v.Policy))) {
		return Value{}, &Refusal{Field: FieldPolicies, Message: fmt.Sprintf("%s %s is not among realtime.policies %v", v1alpha1.SchedPolicyAnnotation, annotation, policies)}
	}
	maxPrio := MaxPriority(rt)
	if v.N > maxPrio {
		return Value{}, &Refusal{Field: FieldMaxPriority, Message: fmt.Sprintf("%s %s asks for priority %d, above realtime.maxPriority %d", v1alpha1.SchedPolicyAnnotation, annotation, v.N, maxPrio)}
	}
	return v, nil
}

// MaxPriority is the highest priority the grant allows: maxPriority
// (default 40), held below the threaded IRQ handlers (at most 49) unless
// priorityCeiling is AboveIRQThreads, whatever a LatencyNode spec says.
func MaxPriority(rt *v1alpha1.RealtimeSpec) int {
	n := int(rt.MaxPriority)
	if n == 0 {
		n = v1alpha1.DefaultMaxPriority
	}
	if rt.PriorityCeiling != v1alpha1.CeilingAboveIRQThreads {
		n = min(n, v1alpha1.MaxPriorityBelowIRQThreads)
	}
	return n
}

// Realtime reports whether v is a real-time value (SCHED_FIFO, SCHED_RR),
// the only ones Check grants.
func (v Value) Realtime() bool { return v.isRealtime() }

// Within is the grant rule on CPUs, for a caller that knows a container's
// cpuset before its cgroup exists (the NRI plugin at CreateContainer): a
// real-time policy only on a non-empty subset of the isolated CPUs.
func Within(cpus, isolated cpuset.CPUSet) bool { return cpusetWithin(cpus, isolated) }
