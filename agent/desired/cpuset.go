package desired

import (
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/cpumanager"
	lcpuset "latencytier.io/latencytier/agent/cpuset"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/systemd"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

// podScope covers every isolated pod's cpuset knobs.
var podScope = settingid.CPUSet.ID(settingid.CPUSetPod.Sub)

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
		s.Knobs = append(s.Knobs, systemdKnobs(root, k, reserved)...)
		// A slice whose walk failed mid-way: scope cpuset/<slice>.
		s.Undetermined = append(s.Undetermined, failedIDs(r)...)
	}
	if t.CPUs.Isolated == nil || len(isolatedPods) == 0 {
		return
	}
	isolated, err := s.cpus.Isolated, s.cpus.IsolatedErr
	if err != nil || !s.online(root, "cpus/isolated", isolated) {
		return // nothing to keep pods on
	}
	state, err := cpumanager.ReadFor(root, isolatedPods)
	if err != nil {
		s.Undetermined = append(s.Undetermined, podScope)
		s.Results = append(s.Results, v1alpha1.SettingResult{Setting: settingid.CPUSet.ID("pods"), State: v1alpha1.SettingFailed,
			Message: fmt.Sprintf("kubelet cpu_manager_state: %v; pods left where they are", err)})
		return
	}
	k, r, err = lcpuset.PodKnobs(root, isolatedPods, isolated, state)
	if err != nil {
		s.Undetermined = append(s.Undetermined, podScope)
		s.Results = append(s.Results, v1alpha1.SettingResult{Setting: settingid.CPUSet.ID("pods"), Desired: isolated.String(),
			State: v1alpha1.SettingFailed, Message: err.Error()})
		return
	}
	s.add(k, r)
	s.Undetermined = append(s.Undetermined, failedIDs(r)...)
	s.partitions(root, t, isolated, isolatedPods, state)
}

// online reports whether every CPU of set (the spec's field) is online.
// When some are not (offline, or beyond the node's CPUs), the field is
// reported Invalid and nothing is confined to it: the kernel refuses such a
// cpuset with EINVAL, and a knob would be journaled and retried every pass.
// A host whose online list cannot be read lets the kernel decide.
func (s *State) online(root *host.Root, field string, set cpuset.CPUSet) bool {
	online, err := cpulist.Online(root)
	if err != nil {
		return true
	}
	missing := set.Difference(online)
	if missing.IsEmpty() {
		return true
	}
	s.Results = append(s.Results, v1alpha1.SettingResult{Setting: field, Desired: set.String(), Actual: online.String(),
		State:   v1alpha1.SettingInvalid,
		Message: fmt.Sprintf("CPUs %s are not online on this node (online: %s); the settings that use %s are left untouched here", missing, online, field)})
	return false
}

// systemdKnobs confines, on a cgroup v2 host run by systemd, each slice of
// systemd.Slices that got a cpuset.cpus knob through systemd as well
// (runtime AllowedCPUs), so a daemon-reload keeps the confinement instead of
// rewriting cpuset.cpus. They come after the file knobs: the file's original
// is journaled before systemd rewrites it, and revert restores AllowedCPUs
// first, letting systemd put the file back.
func systemdKnobs(root *host.Root, fileKnobs []knob.Knob, reserved cpuset.CPUSet) []knob.Knob {
	if v, _ := podcgroup.Mode(root); v != 2 || !systemd.Booted(root) {
		return nil
	}
	var out []knob.Knob
	for _, unit := range systemd.Slices {
		if slices.ContainsFunc(fileKnobs, func(k knob.Knob) bool { return k.ID == settingid.CPUSet.ID(unit) }) {
			out = append(out, systemd.Knob(unit, reserved))
		}
	}
	return out
}
