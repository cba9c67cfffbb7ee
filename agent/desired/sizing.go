package desired

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	snap "latencytier.io/latencytier/agent/snapshot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// SettingCPUSizing is the result of the per-node sizing check of spec.cpus.
const SettingCPUSizing = "cpus/sizing"

// CheckSizing is the per-node check of spec.cpus (the CRD checks what it
// can see, the lists as written; only the node knows which of their CPUs
// it has): on the node's online CPUs, the housekeeping CPUs (cpus.reserved,
// or every online CPU not isolated where reserved is not given, which is
// where the tick, RCU callbacks, kubelet and the runtime then run) must be
// at least one for every v1alpha1.IsolatedPerReservedCPU isolated ones, and
// CPU 0 is isolated only when cpus.cpu0 is Isolatable. It returns nil when
// the sizing holds or nothing is isolated here, else an Invalid result
// naming the field and the numbers. online is the node's online CPUs (the
// union of the lists when they cannot be read). A cpus.reserved with no CPU
// online here is left to the online check (cpus/reserved Invalid, the boot
// plan Failed), which already keeps every setting derived from spec.cpus
// off this node.
func CheckSizing(online cpuset.CPUSet, cpus snap.CPUs, spec *v1alpha1.CPUSpec) *v1alpha1.SettingResult {
	if spec == nil || spec.Isolated == nil || cpus.Err != nil {
		return nil // unset, or reported Invalid as not a cpulist already
	}
	isolated := cpus.Isolated.Intersection(online)
	if isolated.IsEmpty() {
		return nil
	}
	invalid := func(format string, args ...any) *v1alpha1.SettingResult {
		return &v1alpha1.SettingResult{Setting: SettingCPUSizing, Desired: *spec.Isolated, Actual: online.String(), State: v1alpha1.SettingInvalid,
			Message: fmt.Sprintf(format, args...) + "; the settings derived from spec.cpus (isolation, confinement, partitions, IRQ affinity, real-time grants, boot isolation arguments) are left untouched on this node, the rest of the profile applies"}
	}
	if isolated.Contains(0) && spec.CPU0 != v1alpha1.CPU0Isolatable {
		return invalid("spec.cpus.isolated %q holds CPU 0, which stays housekeeping unless spec.cpus.cpu0 is Isolatable (interrupts, timers and firmware calls land on CPU 0 on many machines)", *spec.Isolated)
	}
	housekeeping, field := online.Difference(isolated), "the online CPUs not in spec.cpus.isolated"
	if spec.Reserved != nil {
		housekeeping, field = cpus.Reserved.Intersection(online), fmt.Sprintf("spec.cpus.reserved %q", *spec.Reserved)
		if housekeeping.IsEmpty() {
			return nil // no reserved CPU online here: cpus/reserved is Invalid, the boot plan Failed, each saying so
		}
	}
	need := (isolated.Size() + v1alpha1.IsolatedPerReservedCPU - 1) / v1alpha1.IsolatedPerReservedCPU
	if housekeeping.Size() < need {
		return invalid("spec.cpus.isolated %q isolates %d online CPUs on this node, which need at least %d housekeeping CPUs (one per %d isolated), and %s leaves %d online (%s)",
			*spec.Isolated, isolated.Size(), need, v1alpha1.IsolatedPerReservedCPU, field, housekeeping.Size(), cpuList(housekeeping))
	}
	return nil
}

func cpuList(s cpuset.CPUSet) string {
	if s.IsEmpty() {
		return "none"
	}
	return "CPUs " + s.String()
}

// sizing runs CheckSizing on the node's online CPUs.
func sizing(root *host.Root, cpus snap.CPUs, spec *v1alpha1.CPUSpec) *v1alpha1.SettingResult {
	online, err := cpulist.Online(root)
	if err != nil {
		if spec == nil || spec.Reserved == nil {
			return nil // no housekeeping set to judge: the kernel decides
		}
		online = cpus.Isolated.Union(cpus.Reserved)
	}
	return CheckSizing(online, cpus, spec)
}
