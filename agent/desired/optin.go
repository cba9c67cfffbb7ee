package desired

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/cpuquota"
	lcpuset "latencytier.io/latencytier/agent/cpuset"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Event reasons for a pod whose opt-in the profile does not grant.
const (
	ReasonQuotaOptInRefused    = "QuotaOptInRefused"
	ReasonIsolatedOptInRefused = "IsolatedCPUsOptInRefused"
)

// Profile fields that grant an opt-in, named in refusals.
const (
	quotaGrant    = "cpuQuota.namespaceSelector"
	isolatedGrant = "cpus.namespaceSelector"
)

// Refusal is a pod that asked for something its namespace is not granted:
// it is reported (Result, and an event on the pod), not tuned.
type Refusal struct {
	Pod podcgroup.Pod
	// Field is the profile field that did not grant it.
	Field string
	// Reason is the event reason.
	Reason string
	// Result is the setting result in status (State Refused).
	Result v1alpha1.SettingResult
}

// OptIns are the pods that asked (annotation latencytier.io/cpu-quota:
// disable, or cpuQuota.podSelector), sorted by what the profile grants their
// namespace.
type OptIns struct {
	// Quota are granted CFS quota removal or burst (OptedIn set); only when
	// the policy is Remove or Burst.
	Quota []podcgroup.Pod
	// Isolated are granted the isolated CPUs (Isolated set); only when
	// cpus.isolated is set.
	Isolated []podcgroup.Pod
	// Refused asked for something their namespace is not granted.
	Refused []Refusal
	// All are every pod, OptedIn and Isolated set as granted (for
	// measurement: a granted pod's throttling counts against the budget).
	All []podcgroup.Pod
}

// SortOptIns decides, per pod, what it asked for and what it is granted.
// Only the profile's namespace selectors grant: OptedIn and Isolated as the
// caller set them are ignored.
func SortOptIns(t v1alpha1.TuningSpec, pods []podcgroup.Pod) OptIns {
	var podSel *metav1.LabelSelector
	removing := t.CPUQuota != nil && t.CPUQuota.Policy != v1alpha1.CPUQuotaKeep
	if t.CPUQuota != nil {
		podSel = t.CPUQuota.PodSelector
	}
	isolating := t.CPUs != nil && t.CPUs.Isolated != nil
	var o OptIns
	for _, p := range pods {
		p.OptedIn, p.Burst, p.Isolated = false, false, false
		if !podcgroup.Asks(p.Annotations, p.Labels, podSel) {
			o.All = append(o.All, p)
			continue
		}
		if removing {
			p.OptedIn = podcgroup.Granted(p.NamespaceLabels, t.CPUQuota.NamespaceSelector)
			p.Burst = p.OptedIn && t.CPUQuota.Policy == v1alpha1.CPUQuotaBurst
			if !p.OptedIn {
				id, what := cpuquota.PodID(p), "CFS quota removal"
				if t.CPUQuota.Policy == v1alpha1.CPUQuotaBurst {
					id, what = cpuquota.BurstID(p), "a CFS burst"
				}
				o.Refused = append(o.Refused, refusal(p, id, quotaGrant, t.CPUQuota.NamespaceSelector,
					ReasonQuotaOptInRefused, what, "its CPU limit is kept"))
			}
		}
		if isolating {
			p.Isolated = podcgroup.Granted(p.NamespaceLabels, t.CPUs.NamespaceSelector)
			if !p.Isolated {
				o.Refused = append(o.Refused, refusal(p, lcpuset.PodID(p), isolatedGrant, t.CPUs.NamespaceSelector,
					ReasonIsolatedOptInRefused, "the isolated CPUs", "it stays where it is"))
			}
		}
		if p.OptedIn {
			o.Quota = append(o.Quota, p)
		}
		if p.Isolated {
			o.Isolated = append(o.Isolated, p)
		}
		o.All = append(o.All, p)
	}
	return o
}

func refusal(p podcgroup.Pod, setting, field string, sel *v1alpha1.NamespaceSelector, reason, what, outcome string) Refusal {
	why := fmt.Sprintf("%s does not select namespace %s", field, p.Namespace)
	if sel == nil {
		why = fmt.Sprintf("the profile sets no %s, so no namespace is granted it", field)
	}
	msg := fmt.Sprintf("pod %s/%s opted in to %s, but %s; %s", p.Namespace, p.Name, what, why, outcome)
	return Refusal{Pod: p, Field: field, Reason: reason,
		Result: v1alpha1.SettingResult{Setting: setting, State: v1alpha1.SettingRefused, Message: msg}}
}
