package desired

import (
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// cpusetKnobs confines system services to the reserved CPUs.
//
// INTEGRATION POINT (cgroups helper): agent/cpuset is not committed yet; once
// it is, this becomes cpuset.Knobs(root, reserved).
func cpusetKnobs(root *host.Root, reserved cpuset.CPUSet) ([]knob.Knob, []v1alpha1.SettingResult) {
	_ = root
	_ = reserved
	return nil, nil
}
