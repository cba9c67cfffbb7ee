// Package cpumanager reads kubelet's CPU manager state
// (/var/lib/kubelet/cpu_manager_state): the policy and which CPUs kubelet
// gave each container. The cpuset writer and the measurement findings both
// read it here.
package cpumanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
)

// CPU manager policies kubelet writes to cpu_manager_state.
const (
	PolicyNone   = "none"
	PolicyStatic = "static"
)

// State is kubelet's /var/lib/kubelet/cpu_manager_state.
type State struct {
	// PolicyName is "none" or "static".
	PolicyName string
	// DefaultCPUSet is the shared pool (static policy).
	DefaultCPUSet cpuset.CPUSet
	// Entries maps pod UID → container name → exclusive CPUs.
	Entries map[string]map[string]cpuset.CPUSet
}

// OwnsPlacement reports whether kubelet's CPU manager sets container
// cpusets itself. The static policy does, for every container: exclusive
// CPUs for Guaranteed integer-CPU containers, the shared pool for the rest,
// re-written on each reconcile. Any policy but "none" is treated as owning.
func (s *State) OwnsPlacement() bool {
	return s != nil && s.PolicyName != "" && s.PolicyName != PolicyNone
}

// PodCPUs returns the union of a pod's exclusive CPUs and whether it has any.
func (s *State) PodCPUs(uid string) (cpuset.CPUSet, bool) {
	if s == nil {
		return cpuset.New(), false
	}
	var out cpuset.CPUSet
	for _, c := range s.Entries[uid] {
		out = out.Union(c)
	}
	return out, len(s.Entries[uid]) > 0
}

type stateFile struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
	Checksum      uint64                       `json:"checksum"`
}

// Read parses kubelet's cpu_manager_state under the host
// root. A missing file (no kubelet, or a kubelet that never started its CPU
// manager) gives nil state and nil error: nothing owns placement.
func Read(root *host.Root) (*State, error) {
	path := root.KubeletDir("cpu_manager_state")
	b, err := root.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Parse parses the file's JSON.
func Parse(b []byte) (*State, error) {
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("parsing kubelet cpu_manager_state: %w", err)
	}
	if f.PolicyName == "" {
		return nil, fmt.Errorf("kubelet cpu_manager_state has no policyName")
	}
	def, err := cpulist.Parse(strings.TrimSpace(f.DefaultCPUSet))
	if err != nil {
		return nil, fmt.Errorf("kubelet cpu_manager_state defaultCpuSet: %w", err)
	}
	s := &State{PolicyName: f.PolicyName, DefaultCPUSet: def, Entries: map[string]map[string]cpuset.CPUSet{}}
	for uid, containers := range f.Entries {
		s.Entries[uid] = map[string]cpuset.CPUSet{}
		for name, list := range containers {
			c, err := cpulist.Parse(strings.TrimSpace(list))
			if err != nil {
				return nil, fmt.Errorf("kubelet cpu_manager_state entry %s/%s: %w", uid, name, err)
			}
			s.Entries[uid][name] = c
		}
	}
	return s, nil
}
