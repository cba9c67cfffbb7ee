// Package owners names the node's other writers and decides, without
// touching the host, which of the agent's knobs target what one of them
// owns. Detect reads the node once per pass (processes, kubelet's CPU
// manager, the cpusets of the node's containers, the cpusets the runtime
// handed the agent's NRI plugin already set, CRI-O's configuration and pod
// annotations, TuneD's active profile) into a Set; Set.OwnerOf is the pure
// check the pass asks of every knob before the plan: a knob another writer
// owns becomes an OwnedBy result and is never written, nor re-asserted.
//
// The rule: another writer is a peer. The agent does not fight it; it names
// it and says what to configure there instead. irqbalance is not an owner
// here: the agent cooperates with it (bans the isolated CPUs through its own
// socket, agent/irq), so IRQ affinity stays the agent's beside it.
package owners

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

// Kind is which other writer an owner is.
type Kind string

// The writers Detect knows.
const (
	// KubeletCPUManager is kubelet's CPU manager with a policy that places
	// containers itself (static).
	KubeletCPUManager Kind = "KubeletCPUManager"
	// DRACPUDriver is a DRA CPU driver (kubernetes-sigs/dra-driver-cpu),
	// which assigns exclusive CPUs through NRI under kubelet's none policy.
	DRACPUDriver Kind = "DRACPUDriver"
	// NRIResourcePolicy is an nri-plugins resource policy
	// (nri-resource-policy-balloons, -topology-aware, ...): it owns
	// container cpusets and, since 2026, IRQ affinity.
	NRIResourcePolicy Kind = "NRIResourcePolicy"
	// NRIPlugin is a writer of container cpusets not identified by its
	// process: an NRI plugin ordered before the agent's, or any other.
	NRIPlugin Kind = "NRIPlugin"
	// CRIOHooks are CRI-O's high-performance hooks, driven by pod
	// annotations a runtime handler allows.
	CRIOHooks Kind = "CRIOHooks"
	// TuneD is a TuneD daemon with an active profile (also NTO's).
	TuneD Kind = "TuneD"
)

// Owner is another writer on the node.
type Owner struct {
	Kind Kind
	// Name names it for status: "dra-driver-cpu (pid 4242)".
	Name string
	// Instead says what to configure at the owner instead of in the
	// profile.
	Instead string
}

// Hold is CPUs an owner placed a container on.
type Hold struct {
	Owner Owner
	CPUs  cpuset.CPUSet
	// Where names the container: its cgroup, or the runtime's pod and
	// container names for a placement seen through NRI.
	Where string
	// Path is the container's cpuset.cpus when found in the cgroup tree.
	Path string
	// Pod and Container identify the container for a placement seen
	// through NRI: the pod's setting ID (cpuset/pod/<ns>/<name>/<uid>) and
	// the short container ID.
	Pod, Container string
}

// Claim is settings an owner owns by what they are, not by the CPUs they
// touch: the sysctls a TuneD profile sets, a pod's quota CRI-O's
// cpu-quota annotation removes.
type Claim struct {
	Owner Owner
	// Scopes are setting IDs or ID prefixes ending before a "/" ("irq"
	// covers "irq/24"); an element may be a pattern ("power/*/governor").
	Scopes []string
	// Sysctls are sysctl names ("kernel.sched_rt_runtime_us"), matched
	// against a knob's path under SysctlDir.
	Sysctls []string
	// Why says what of the owner claims them.
	Why string
}

// Set is what Detect found in one pass.
type Set struct {
	// Running are the other writers found, each once.
	Running []Owner
	Holds   []Hold
	Claims  []Claim
	// SysctlDir is the host's /proc/sys (under the host root): a knob
	// there is the sysctl its path names.
	SysctlDir string
	// Errs are what could not be read, each naming its path; a source
	// that could not be read claims nothing.
	Errs []error
}

// OwnerOf returns the OwnedBy result of k when another writer owns its
// target, false when the agent may write it. A claim by what the setting
// is wins over a hold of the CPUs it touches.
func (s Set) OwnerOf(k knob.Knob) (v1alpha1.SettingResult, bool) {
	for _, c := range s.Claims {
		if c.covers(k, s.SysctlDir) {
			return owned(k, c.Owner, fmt.Sprintf("%s owns it (%s); the agent leaves it: %s", c.Owner.Name, c.Why, c.Owner.Instead)), true
		}
	}
	for _, h := range s.Holds {
		if h.container(k) {
			return owned(k, h.Owner, fmt.Sprintf("%s placed %s on CPUs %s; the agent does not move it: %s", h.Owner.Name, h.Where, h.CPUs, h.Owner.Instead)), true
		}
	}
	cpus, ok := placesWork(k)
	if !ok {
		return v1alpha1.SettingResult{}, false
	}
	for _, h := range s.Holds {
		if both := cpus.Intersection(h.CPUs); !both.IsEmpty() {
			return owned(k, h.Owner, fmt.Sprintf("%s placed %s on CPUs %s, and this setting would put work on CPUs %s; the agent leaves it: %s",
				h.Owner.Name, h.Where, h.CPUs, both, h.Owner.Instead)), true
		}
	}
	return v1alpha1.SettingResult{}, false
}

func owned(k knob.Knob, o Owner, msg string) v1alpha1.SettingResult {
	return v1alpha1.SettingResult{Setting: k.ID, Desired: k.Desired, State: v1alpha1.SettingOwnedBy, Owner: o.Name, Message: msg}
}

func (c Claim) covers(k knob.Knob, sysctlDir string) bool {
	if slices.ContainsFunc(c.Scopes, func(s string) bool { return inScope(s, k.ID) }) {
		return true
	}
	if len(c.Sysctls) == 0 || sysctlDir == "" {
		return false
	}
	rel, err := filepath.Rel(sysctlDir, k.Path)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	return slices.Contains(c.Sysctls, strings.ReplaceAll(rel, "/", "."))
}

// inScope reports whether scope names id or an ID below it, element by
// element; an element of scope may be a path.Match pattern
// ("power/*/governor" covers "power/cpu1/governor").
func inScope(scope, id string) bool {
	want, have := strings.Split(scope, "/"), strings.Split(id, "/")
	if len(have) < len(want) {
		return false
	}
	for i, w := range want {
		if ok, err := path.Match(w, have[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// container reports whether k writes the very container h is about.
func (h Hold) container(k knob.Knob) bool {
	if h.Path != "" && k.Path == h.Path {
		return true
	}
	return h.Pod != "" && h.Container != "" && k.ID == h.Pod+"/"+h.Container
}

// placesWork returns the CPUs a knob would let work run on: a cgroup's
// cpuset (system slices, pods, systemd's AllowedCPUs) or an IRQ's
// affinity. Any other knob places nothing.
func placesWork(k knob.Knob) (cpuset.CPUSet, bool) {
	kind, rest, ok := settingid.Parse(k.ID)
	if !ok {
		return cpuset.CPUSet{}, false
	}
	switch {
	case kind.Name == settingid.CPUSet.Name && rest != "cgroup.subtree_control" && rest != "pods":
	case kind.Name == settingid.IRQ.Name && rest == "default_smp_affinity":
		set, err := cpulist.ParseMask(k.Desired)
		return set, err == nil && !set.IsEmpty()
	case kind.Name == settingid.IRQ.Name:
	default:
		return cpuset.CPUSet{}, false
	}
	set, err := cpulist.Parse(strings.TrimSpace(k.Desired))
	if err != nil || set.IsEmpty() {
		return cpuset.CPUSet{}, false
	}
	return set, true
}
