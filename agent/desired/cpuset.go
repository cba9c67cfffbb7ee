package desired

import (
	"fmt"

	"k8s.io/utils/cpuset"

	lcpuset "latencytier.io/latencytier/agent/cpuset"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// podScope covers every isolated pod's cpuset knobs.
const podScope = "cpuset/pod"

// cpusets confines system services to the reserved CPUs and keeps the pods
// granted the isolated CPUs there, unless kubelet's CPU manager owns their
// placement (then it only reports).
func (s *State) cpusets(root *host.Root, t v1alpha1.TuningSpec, reserved cpuset.CPUSet, isolatedPods []podcgroup.Pod) {
	k, r, err := lcpuset.Knobs(root, reserved)
	if err != nil {
		s.Undetermined = append(s.Undetermined, "cpuset")
		s.Results = append(s.Results, v1alpha1.SettingResult{Setting: "cpuset", Desired: reserved.String(),
			State: v1alpha1.SettingFailed, Message: err.Error()})
	} else {
		s.add(k, r)
		// A slice whose walk failed mid-way: scope cpuset/<slice>.
		s.Undetermined = append(s.Undetermined, failedIDs(r)...)
	}
	if t.CPUs.Isolated == nil || len(isolatedPods) == 0 {
		return
	}
	isolated, err := cpuset.Parse(*t.CPUs.Isolated)
	if err != nil {
		return // reported by the CRD; nothing to keep pods on
	}
	state, err := lcpuset.ReadCPUManagerState(root)
	if err != nil {
		s.Undetermined = append(s.Undetermined, podScope)
		s.Results = append(s.Results, v1alpha1.SettingResult{Setting: "cpuset/pods", State: v1alpha1.SettingFailed,
			Message: fmt.Sprintf("kubelet cpu_manager_state: %v; pods left where they are", err)})
		return
	}
	k, r, err = lcpuset.PodKnobs(root, isolatedPods, isolated, state)
	if err != nil {
		s.Undetermined = append(s.Undetermined, podScope)
		s.Results = append(s.Results, v1alpha1.SettingResult{Setting: "cpuset/pods", Desired: isolated.String(),
			State: v1alpha1.SettingFailed, Message: err.Error()})
		return
	}
	s.add(k, r)
	s.Undetermined = append(s.Undetermined, failedIDs(r)...)
}
