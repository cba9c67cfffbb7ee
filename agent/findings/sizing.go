package findings

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/api/v1alpha1"
)

// onlinePerReserved is how many online CPUs one reserved (housekeeping) CPU
// serves at most. Our rule, not the kernel's: kubelet, the container
// runtime, system services, every movable IRQ and unbound kernel work run
// on the reserved CPUs, and that load grows with the node (more pods, more
// IRQ queues). Together with one reserved CPU per NUMA node (RHEL's
// realtime tuned profile keeps one housekeeping CPU per NUMA node,
// hk_per_numa=1; OpenShift's node tuning reference reserves the first core
// of each socket) it gives the fewest reserved CPUs a node needs.
const onlinePerReserved = 16

// reservedSize checks the profile's reserved set against this node's CPUs.
func reservedSize(o Observation) *v1alpha1.Finding {
	if (o.Isolated.IsEmpty() && o.Reserved.IsEmpty()) || o.Online.IsEmpty() {
		return nil
	}
	return reservedTooSmall(o.Reserved, o.Isolated, o.Online, o.NUMA)
}

// reservedTooSmall reports a reserved set too small for the node: no online
// reserved CPU while CPUs are isolated (housekeeping then has no CPUs of its
// own), fewer online reserved CPUs than max(NUMA nodes with CPUs,
// ceil(online/onlinePerReserved)), or a NUMA node with online CPUs and no
// reserved one (its IRQs and housekeeping then cross the interconnect).
// numa maps each NUMA node to its CPUs.
func reservedTooSmall(reserved, isolated, online cpuset.CPUSet, numa map[int]cpuset.CPUSet) *v1alpha1.Finding {
	have := reserved.Intersection(online)
	if have.IsEmpty() {
		if isolated.IsEmpty() {
			return nil
		}
		return finding(FindingReservedTooSmall, SeverityWarning,
			"CPUs %s are isolated but no online CPU is reserved (cpus.reserved %q) on this node of %d online CPUs: kubelet, system services and IRQs are not kept off the latency pods' neighbours; reserve at least %d CPU(s)",
			isolated, reserved.String(), online.Size(), need(online, numa))
	}
	want := need(online, numa)
	var bare []string
	for node, cpus := range numa {
		if !cpus.Intersection(online).IsEmpty() && cpus.Intersection(have).IsEmpty() {
			bare = append(bare, fmt.Sprintf("node%d", node))
		}
	}
	if have.Size() >= want && len(bare) == 0 {
		return nil
	}
	where := ""
	if len(bare) > 0 {
		slices.Sort(bare)
		where = fmt.Sprintf("; NUMA %s have none", strings.Join(bare, ", "))
	}
	return finding(FindingReservedTooSmall, SeverityWarning,
		"%d reserved CPU(s) (%s) for %d online CPUs on %d NUMA node(s)%s: housekeeping (kubelet, runtime, system services, IRQs) needs at least %d here (one per NUMA node and one per %d online CPUs); reserve more or expect it to queue",
		have.Size(), have, online.Size(), max(len(numa), 1), where, want, onlinePerReserved)
}

// need is the fewest reserved CPUs for online CPUs on these NUMA nodes.
func need(online cpuset.CPUSet, numa map[int]cpuset.CPUSet) int {
	nodes := 0
	for _, cpus := range numa {
		if !cpus.Intersection(online).IsEmpty() {
			nodes++
		}
	}
	return max(nodes, (online.Size()+onlinePerReserved-1)/onlinePerReserved, 1)
}
