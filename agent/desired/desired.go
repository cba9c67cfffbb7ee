// Package desired turns a LatencyNode's tuning (plus the pods on the node)
// into the ordered knob list the engine applies, asking each setting package
// in turn: scheduler knobs and sysctls, cpusets, IRQs, CPU quota. Settings the
// node cannot take come back as results (Unsupported, Invalid); findings for
// a human are measure's.
package desired

import (
	"fmt"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpuquota"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/irq"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/power"
	snap "latencytier.io/latencytier/agent/snapshot"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// State is the rendered desired state of one node.
type State struct {
	// Knobs in apply order (revert walks them backwards).
	Knobs []knob.Knob
	// Results are settings that became no knob (Unsupported, Invalid, ...).
	Results []v1alpha1.SettingResult
	// IRQBalancePID is a running irqbalance, 0 when none.
	IRQBalancePID int
	// Refusals are pods that opted in from a namespace the profile does not
	// grant; their results are in Results too.
	Refusals []Refusal
	// Pods are the pods Render was given, OptedIn and Isolated set as
	// granted.
	Pods []podcgroup.Pod
	// Undetermined are setting scopes this pass could not work out (a
	// listing failed, a pod still in the API has no cgroup right now): an
	// ID or an ID prefix ending before a "/" ("irq", "cpuquota/ns/pod").
	// Their absence from Knobs does not mean the spec dropped them.
	Undetermined []string

	// cpus are the profile's CPU classes as the pass's snapshot parsed them.
	cpus snap.CPUs
	// sizing is the Invalid result of the node's sizing check of spec.cpus
	// (CheckSizing), nil when it holds: then nothing derived from spec.cpus
	// is rendered.
	sizing *v1alpha1.SettingResult
}

// Render builds the desired state. Order: scheduler and sysctls, cpusets
// (system slices, then pods granted the isolated CPUs), IRQs, CPU quota (pods
// granted its removal), real-time threads (pods granted realtime). When
// spec.cpus fails the node's sizing check (CheckSizing) it is Invalid here
// and the cpusets, IRQs and real-time grants are not rendered; the rest is. Pods that
// opted in from a namespace the profile does not grant are Refusals, not
// knobs. admin is the cluster admin's sysctl unlock (nil: the built-in
// allowlist only).
func Render(root *host.Root, layout sysctl.Layout, t v1alpha1.TuningSpec, pods []podcgroup.Pod, admin knobs.AdminList) State {
	return RenderOn(root, snap.Node{CPUs: snap.ParseCPUs(t.CPUs)}, layout, t, pods, admin)
}

// RenderOn is Render with the pass's node snapshot: the CPU classes it
// parsed from t.CPUs.
func RenderOn(root *host.Root, node snap.Node, layout sysctl.Layout, t v1alpha1.TuningSpec, pods []podcgroup.Pod, admin knobs.AdminList) State {
	s := State{cpus: node.CPUs}
	k, r := sysctl.Knobs(root, layout, t.Scheduler, t.Sysctls, admin)
	s.add(k, r)
	s.holdRTThrottling(root, t)
	s.add(power.Knobs(root, t))
	in := SortOptIns(t, pods)
	for _, r := range in.Refused {
		s.Results = append(s.Results, r.Result)
	}
	s.Refusals, s.Pods = in.Refused, in.All
	if s.sizing = sizing(root, node.CPUs, t.CPUs); s.sizing != nil {
		s.Results = append(s.Results, *s.sizing)
	}
	reserved, ok := s.reserved(root, t)
	if ok {
		s.cpusets(root, t, reserved, in.Isolated)
	}
	if ok && irqWanted(t) {
		s.irqs(root, reserved)
	}
	if len(in.Quota) > 0 {
		s.quota(root, t.CPUQuota, in.Quota)
	}
	s.realtime(root, t, pods)
	return s
}

func (s *State) add(k []knob.Knob, r []v1alpha1.SettingResult) {
	s.Knobs = append(s.Knobs, k...)
	s.Results = append(s.Results, r...)
}

func (s *State) reserved(root *host.Root, t v1alpha1.TuningSpec) (cpuset.CPUSet, bool) {
	if t.CPUs == nil || t.CPUs.Reserved == nil || s.sizing != nil {
		return cpuset.New(), false
	}
	set, err := s.cpus.Reserved, s.cpus.ReservedErr
	if err != nil || set.IsEmpty() {
		s.Results = append(s.Results, v1alpha1.SettingResult{Setting: "cpus/reserved", Desired: *t.CPUs.Reserved,
			State: v1alpha1.SettingInvalid, Message: fmt.Sprintf("not a cpulist: %v", err)})
		return cpuset.New(), false
	}
	return set, s.online(root, "cpus/reserved", set)
}

func irqWanted(t v1alpha1.TuningSpec) bool {
	return t.IRQ != nil && t.IRQ.Affinity != v1alpha1.IRQAffinityUnchanged
}

func (s *State) irqs(root *host.Root, reserved cpuset.CPUSet) {
	k, err := irq.Knobs(root, reserved)
	if err != nil {
		s.Undetermined = append(s.Undetermined, "irq")
		s.Results = append(s.Results, v1alpha1.SettingResult{Setting: "irq", Desired: reserved.String(),
			State: v1alpha1.SettingFailed, Message: err.Error()})
		return
	}
	s.Knobs = append(s.Knobs, k...)
	// The finding (irqbalance not banned from the isolated CPUs) is
	// measure's; the pid only names the culprit of IRQ drift.
	if ib := facts.IRQBalances(root); len(ib) > 0 {
		s.IRQBalancePID = ib[0].PID
	}
}

// quota renders the opted-in pods' CFS settings: the limit removed
// (Remove) or a burst over it (Burst). Each policy's settings are their own
// kind, so switching policy restores the other's before writing (the
// engine restores dropped settings first): the quota comes back before a
// burst is set, and a burst goes to 0 before the quota is removed.
func (s *State) quota(root *host.Root, spec *v1alpha1.CPUQuotaSpec, opted []podcgroup.Pod) {
	if spec.Policy == v1alpha1.CPUQuotaBurst {
		k, r, err := cpuquota.BurstKnobs(root, opted, spec.Burst())
		s.addPerPod("cpuburst", v1alpha1.SettingFailed, k, r, err)
		return
	}
	k, r, err := cpuquota.Knobs(root, opted)
	s.addPerPod("cpuquota", v1alpha1.SettingFailed, k, r, err)
}

// addPerPod adds what a per-pod setting package (cpuquota, rtsched)
// rendered. When it could not render at all, its whole scope is
// undetermined and reported once with state; otherwise only the settings it
// reports Failed are.
func (s *State) addPerPod(scope string, state v1alpha1.SettingState, k []knob.Knob, r []v1alpha1.SettingResult, err error) {
	if err != nil {
		s.Undetermined = append(s.Undetermined, scope)
		s.Results = append(s.Results, v1alpha1.SettingResult{Setting: scope, State: state, Message: err.Error()})
		return
	}
	s.add(k, r)
	s.Undetermined = append(s.Undetermined, failedIDs(r)...)
}

// failedIDs are the settings of Failed results: the setting packages report
// a pod (still in the API) whose cgroup is not found, or a cgroup they could
// not read, as Failed; settled answers (Unsupported, Immovable) are not.
func failedIDs(rs []v1alpha1.SettingResult) []string {
	var out []string
	for _, r := range rs {
		if r.State == v1alpha1.SettingFailed {
			out = append(out, r.Setting)
		}
	}
	return out
}
