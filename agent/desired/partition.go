package desired

import (
	"path/filepath"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/cpumanager"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/partition"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// partitionScope covers every partition knob.
const partitionScope = "partition"

// partitions makes cpuset partitions (cpus.partition) of the exclusive
// CPUs kubelet's static CPU manager gave the granted pods' containers
// within the isolated CPUs. A container is matched to its assignment by
// its cgroup's cpuset.cpus, which kubelet sets to exactly those CPUs;
// containers on the shared pool get none. Pods whose cgroup is not found
// this pass leave the partition scope undetermined rather than reverted.
func (s *State) partitions(root *host.Root, t v1alpha1.TuningSpec, isolated cpuset.CPUSet, pods []podcgroup.Pod, state *cpumanager.State) {
	typ := partitionType(t.CPUs.Partition)
	if typ == "" {
		return
	}
	if !state.OwnsPlacement() {
		s.Results = append(s.Results, v1alpha1.SettingResult{Setting: partitionScope + "/kubelet", Desired: string(typ), State: v1alpha1.SettingUnsupported,
			Message: "cpus.partition partitions the exclusive CPUs kubelet's static CPU manager assigns, and kubelet here has no static CPU manager state (cpuManagerPolicy: static, with reservedSystemCPUs the reserved CPUs)"})
		return
	}
	kubepods := partition.Kubepods(root)
	node := partition.Probe(root, kubepods)
	var reqs []partition.Request
	for _, p := range pods {
		r, ok := podRequests(root, p, state, isolated, typ)
		if !ok {
			s.Undetermined = append(s.Undetermined, partitionScope)
		}
		reqs = append(reqs, r...)
	}
	s.add(partition.Knobs(root, node, reqs, partition.Options{Kubepods: kubepods, Within: isolated}))
}

func partitionType(p v1alpha1.CPUPartition) partition.Type {
	switch p {
	case v1alpha1.CPUPartitionIsolated:
		return partition.Isolated
	case v1alpha1.CPUPartitionRoot:
		return partition.Root
	}
	return ""
}

// podRequests are the partition requests of one pod's containers holding
// exclusive CPUs; ok is false when the pod's cgroups could not be read.
func podRequests(root *host.Root, p podcgroup.Pod, state *cpumanager.State, isolated cpuset.CPUSet, typ partition.Type) ([]partition.Request, bool) {
	if _, exclusive := state.PodCPUs(p.UID); !exclusive {
		return nil, true
	}
	dirs, err := podcgroup.FindIn(root, "cpuset", p.UID)
	if err != nil || dirs.Version != 2 {
		return nil, err == nil
	}
	var out []partition.Request
	for _, c := range dirs.Containers {
		v, err := root.ReadString(filepath.Join(c, "cpuset.cpus"))
		if err != nil {
			return out, false
		}
		cpus, err := cpulist.Parse(v)
		if err != nil || cpus.IsEmpty() || !cpus.IsSubsetOf(isolated) || !assigned(state, p.UID, cpus) {
			continue
		}
		rel := strings.TrimPrefix(c, root.Cgroup()+"/")
		out = append(out, partition.Request{Cgroup: rel, CPUs: cpus.String(), Type: string(typ)})
	}
	return out, true
}

// assigned reports whether cpus is exactly one of the pod's exclusive
// assignments in kubelet's state.
func assigned(state *cpumanager.State, uid string, cpus cpuset.CPUSet) bool {
	for _, c := range state.Entries[uid] {
		if c.Equals(cpus) {
			return true
		}
	}
	return false
}
