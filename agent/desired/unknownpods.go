package desired

import (
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

// PodsSetting names the result of a pass that could not learn the node's
// pods.
const PodsSetting = "pods"

// PodScopes are the scopes of every setting made for pods: the pod-scoped
// kinds (settingid.Kind.PodScoped) and the partitions, which only granted
// pods' CPUs make.
func PodScopes() []string {
	var out []string
	for _, k := range settingid.Kinds {
		if k.PodScoped {
			out = append(out, k.Prefix()[:len(k.Prefix())-1])
		}
	}
	return append(out, partitionScope)
}

// PodsUnknown marks a state rendered without the node's pods because they
// could not be learned (why): what pods hold stays as applied, undetermined
// rather than reverted, and when the tuning grants pods anything (PodsMatter)
// the pass reports one Failed result saying why, so the node never looks
// tuned while no pod is.
func (s *State) PodsUnknown(t v1alpha1.TuningSpec, why error) {
	s.Undetermined = append(s.Undetermined, PodScopes()...)
	if !PodsMatter(t) {
		return
	}
	s.Results = append(s.Results, v1alpha1.SettingResult{Setting: PodsSetting, State: v1alpha1.SettingFailed,
		Message: "no pod tuned, pods' settings left as they are: " + why.Error()})
}

// PodsMatter reports whether the tuning grants pods anything: quota removal
// or burst, the isolated CPUs, real-time scheduling.
func PodsMatter(t v1alpha1.TuningSpec) bool {
	return t.CPUQuota != nil || t.Realtime != nil || (t.CPUs != nil && t.CPUs.Isolated != nil && t.CPUs.NamespaceSelector != nil)
}
