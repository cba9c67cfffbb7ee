// Package cpumanager reads kubelet's CPU manager state: the policy and which
// CPUs kubelet gave each container exclusively. It asks kubelet's
// PodResources gRPC API (/var/lib/kubelet/pod-resources/kubelet.sock), and
// reads kubelet's internal checkpoint (/var/lib/kubelet/cpu_manager_state)
// only where the API is unavailable, saying so in State.Fallback. The cpuset
// writer and the measurement findings both read it here.
package cpumanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
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
	// Entries maps pod UID → container name → exclusive CPUs. From the
	// PodResources API, which names pods by namespace/name, only the pods
	// given to ForPods (or ReadFor) are here.
	Entries map[string]map[string]cpuset.CPUSet
	// Source is where the state was read: SourcePodResources or
	// SourceCheckpoint.
	Source string
	// Fallback says why the checkpoint was read instead of the API (empty
	// when Source is SourcePodResources).
	Fallback string

	// byName maps pod namespace/name → container → exclusive CPUs (the
	// PodResources API only).
	byName map[string]map[string]cpuset.CPUSet
}

// Origin says where the state came from, for status messages and logs.
func (s *State) Origin() string {
	if s == nil {
		return "no PodResources socket and no cpu_manager_state"
	}
	if s.Source == SourcePodResources {
		return "from kubelet's PodResources API"
	}
	if s.Fallback == "" {
		return "from kubelet's checkpoint cpu_manager_state"
	}
	return "from kubelet's checkpoint cpu_manager_state (" + s.Fallback + ")"
}

// ForPods keys the PodResources API's assignments of pods by their UIDs,
// so PodCPUs and Entries answer for them. A checkpoint state is keyed by
// UID already and is returned as is.
func (s *State) ForPods(pods []podcgroup.Pod) *State {
	if s == nil || s.byName == nil {
		return s
	}
	for _, p := range pods {
		if c, ok := s.byName[p.Namespace+"/"+p.Name]; ok && p.UID != "" {
			s.Entries[p.UID] = c
		}
	}
	return s
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

// Read asks kubelet's PodResources API and, where its socket is absent or
// its answer fails or does not pass the checks, reads the checkpoint,
// recording why in Fallback. Neither (no kubelet, or a kubelet that never
// started its CPU manager) gives nil state and nil error: nothing owns
// placement.
func Read(root *host.Root) (*State, error) {
	s, err := ReadPodResources(context.Background(), root)
	if err == nil {
		return s, nil
	}
	cs, cerr := ReadCheckpoint(root)
	if cs != nil {
		cs.Fallback = err.Error()
	}
	return cs, cerr
}

// ReadFor is Read with the assignments of pods keyed by their UIDs.
func ReadFor(root *host.Root, pods []podcgroup.Pod) (*State, error) {
	s, err := Read(root)
	return s.ForPods(pods), err
}

// ReadCheckpoint parses kubelet's cpu_manager_state under the host root. A
// missing file gives nil state and nil error.
func ReadCheckpoint(root *host.Root) (*State, error) {
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
	s := &State{PolicyName: f.PolicyName, DefaultCPUSet: def, Source: SourceCheckpoint, Entries: map[string]map[string]cpuset.CPUSet{}}
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
