package rtsched

import (
	"fmt"
	"path/filepath"
	"slices"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
)

// A real-time grant is judged on what the pod's threads cannot change: the
// CPUs of their container's cgroup cpuset. A thread's own affinity
// (sched_setaffinity) is its to change at any time: judged on it once per
// pass, a thread could narrow it onto the isolated CPUs, get SCHED_FIFO,
// and widen it back onto the shared CPUs until the next pass. The kernel
// clamps every affinity to the task's cpuset (sched_setaffinity keeps only
// the CPUs the cpuset allows), and a task cannot write its own cgroup, so a
// grant made while the cpuset lies within the isolated CPUs holds between
// passes.

// maxCpusetFile bounds a cpuset cpulist read: 8192 CPUs, every other one
// listed ("0,2,4,...") is under 20 KiB.
const maxCpusetFile = 64 << 10

// cpusetFiles are the files that hold the CPUs a cgroup's tasks may run on,
// the first that exists read: on cgroup v2 cpuset.cpus.effective (cpuset.cpus
// may be empty, meaning the parent's); on v1 cpuset.effective_cpus (which
// differs from cpuset.cpus only under the cpuset_v2_mode mount option),
// then cpuset.cpus on kernels without it.
func cpusetFiles(version int) []string {
	if version == 2 {
		return []string{"cpuset.cpus.effective"}
	}
	return []string{"cpuset.effective_cpus", "cpuset.cpus"}
}

// cgroupCPUs reads the CPUs cgroup dir lets its tasks run on, strictly: a
// bounded read and a cpulist that cpulist.Parse accepts. The file is named
// in errors and returned for messages.
func cgroupCPUs(root *host.Root, version int, dir string) (cpuset.CPUSet, string, error) {
	for _, name := range cpusetFiles(version) {
		path := filepath.Join(dir, name)
		if !root.Exists(path) {
			continue
		}
		b, err := readBounded(path, maxCpusetFile)
		if err != nil {
			return cpuset.New(), path, err
		}
		set, err := cpulist.Parse(string(b))
		if err != nil {
			return cpuset.New(), path, fmt.Errorf("%s: %w", path, err)
		}
		return set, path, nil
	}
	return cpuset.New(), "", fmt.Errorf("cgroup %s has no %v: the cpuset controller is not enabled for it, so nothing bounds where its threads run", dir, cpusetFiles(version))
}

// cpusetWithin is the grant rule: a container's threads may be real-time
// only when its cgroup's CPUs are a non-empty subset of the profile's
// isolated CPUs (an empty set is no evidence: it is refused).
func cpusetWithin(cgroup, isolated cpuset.CPUSet) bool {
	return !cgroup.IsEmpty() && cgroup.IsSubsetOf(isolated)
}

// cpusetDirs maps each container cgroup of the cpu controller (dirs) to its
// cgroup in the cpuset controller: the same directory on cgroup v2 (one
// tree), the container of the same ID in the pod's v1 cpuset tree. A
// container without one maps to "".
func cpusetDirs(root *host.Root, uid string, dirs *podcgroup.Dirs, ctrs []string, opts []podcgroup.Option) (map[string]string, int, error) {
	out := map[string]string{}
	if dirs.Version == 2 {
		for _, c := range ctrs {
			out[c] = c
		}
		return out, 2, nil
	}
	cs, err := podcgroup.FindIn(root, "cpuset", uid, opts...)
	if err != nil {
		return nil, 1, err
	}
	for _, c := range ctrs {
		i := slices.IndexFunc(cs.Containers, func(d string) bool { return filepath.Base(d) == filepath.Base(c) })
		if i >= 0 {
			out[c] = cs.Containers[i]
		}
	}
	return out, cs.Version, nil
}
