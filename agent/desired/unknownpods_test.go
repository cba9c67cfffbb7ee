package desired

import (
	"errors"
	"slices"
	"strings"
	"testing"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Unknown pods hold every pod-scoped setting (as the engine's split reads
// scopes: an ID prefix before a "/") and say why in one Failed result.
func TestPodsUnknownHoldsEveryPodScope(t *testing.T) {
	var s State
	quota := v1alpha1.TuningSpec{CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove, NamespaceSelector: &v1alpha1.NamespaceSelector{}}}
	s.PodsUnknown(quota, errors.New("no NRI socket at /var/run/nri/nri.sock"))
	for _, id := range []string{"cpuquota/ns/pod/uid", "cpuburst/ns/pod/uid/c", "rtsched/ns/pod/uid", "cpuset/pod/ns/pod/uid/c", "partition/exclusive/x"} {
		if !slices.ContainsFunc(s.Undetermined, func(scope string) bool { return strings.HasPrefix(id, scope+"/") }) {
			t.Errorf("%s is not held: scopes %v", id, s.Undetermined)
		}
	}
	for _, id := range []string{"sysctl/kernel.x", "irq/24", "cpuset/system.slice", "scheduler/autogroup"} {
		if slices.ContainsFunc(s.Undetermined, func(scope string) bool { return strings.HasPrefix(id, scope+"/") || id == scope }) {
			t.Errorf("node-wide %s is held: scopes %v", id, s.Undetermined)
		}
	}
	if len(s.Results) != 1 || s.Results[0].Setting != PodsSetting || s.Results[0].State != v1alpha1.SettingFailed ||
		!strings.Contains(s.Results[0].Message, "no NRI socket") {
		t.Errorf("results %+v; want one Failed %q saying why", s.Results, PodsSetting)
	}
}

// A tuning that grants pods nothing holds their scopes all the same but is
// not reported failed for not knowing them.
func TestPodsUnknownWithoutPodSettings(t *testing.T) {
	var s State
	s.PodsUnknown(v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{}}, errors.New("no socket"))
	if len(s.Results) != 0 || len(s.Undetermined) == 0 {
		t.Errorf("results %+v, held %v; want no result and the pod scopes held", s.Results, s.Undetermined)
	}
}
