// Package power turns spec.power into knobs. Per CPU of each class (all,
// reserved, isolated): the PM QoS resume-latency limit
// (cpuN/power/pm_qos_resume_latency_us), the disable file of every cpuidle
// state whose exit latency exceeds it, and the cpufreq scaling governor (one
// knob per cpufreq policy). Both idle controls are written because no single
// one covers every idle path: menu, teo and ladder honour both, idle
// injection only the disable files, the haltpoll governor only a PM QoS
// limit of 0. Knobs go through the same journal, apply, drift and revert
// machinery as every other setting. The package also checks whether the
// isolated CPUs may still enter deep idle states (Findings).
package power

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
	"latencytier.io/latencytier/internal/settingid"
)

// Class names, as in spec.power.
const (
	classAll      = "all"
	classReserved = "reserved"
	classIsolated = "isolated"
)

// class is one CPU class of spec.power with its setting.
type class struct {
	name string
	cpus *string // the cpus field it needs; unused for all
	spec *v1alpha1.CPUPower
}

func classes(t v1alpha1.TuningSpec) []class {
	var reserved, isolated *string
	if t.CPUs != nil {
		reserved, isolated = t.CPUs.Reserved, t.CPUs.Isolated
	}
	var out []class
	for _, c := range []class{{classAll, nil, t.Power.All}, {classReserved, reserved, t.Power.Reserved}, {classIsolated, isolated, t.Power.Isolated}} {
		if c.spec != nil {
			out = append(out, c)
		}
	}
	return out
}

// policy is a cpufreq policy already given a governor this pass.
type policy struct {
	cpu      int
	class    string
	governor string
}

// renderer collects knobs and results over the classes.
type renderer struct {
	root     *host.Root
	knobs    []knob.Knob
	results  []v1alpha1.SettingResult
	policies map[string]policy // by resolved cpufreq directory
}

// Knobs returns the knobs of t.Power in class order (all, reserved,
// isolated) and, per CPU, resume latency, idle-state disables, governor.
// What a node cannot take comes back as results: a class whose CPUs are not
// online is Invalid; CPUs without the PM QoS file or without cpufreq (most
// VMs), or whose cpufreq driver does not offer the governor, are one
// Unsupported result per class, never Failed.
func Knobs(root *host.Root, t v1alpha1.TuningSpec) ([]knob.Knob, []v1alpha1.SettingResult) {
	if t.Power == nil {
		return nil, nil
	}
	r := renderer{root: root, policies: map[string]policy{}}
	for _, c := range classes(t) {
		if cpus, ok := r.cpus(c); ok {
			r.class(c, cpus)
		}
	}
	return r.knobs, r.results
}

// cpus resolves a class to its online CPUs; a class that cannot be resolved
// is reported Invalid and left untouched.
func (r *renderer) cpus(c class) (cpuset.CPUSet, bool) {
	online, err := cpulist.Online(r.root)
	invalid := func(desired, format string, args ...any) (cpuset.CPUSet, bool) {
		r.results = append(r.results, v1alpha1.SettingResult{Setting: settingid.Power.ID(c.name), Desired: desired,
			State: v1alpha1.SettingInvalid, Message: fmt.Sprintf(format, args...)})
		return cpuset.New(), false
	}
	if c.name == classAll {
		if err != nil {
			return invalid("", "cannot list the online CPUs: %v; power.all left untouched", err)
		}
		return online, true
	}
	if c.cpus == nil {
		return invalid("", "power.%s needs cpus.%s", c.name, c.name)
	}
	set, perr := cpulist.Parse(*c.cpus)
	if perr != nil || set.IsEmpty() {
		return invalid(*c.cpus, "cpus.%s is not a cpulist (%v); power.%s left untouched", c.name, perr, c.name)
	}
	if err == nil && !set.IsSubsetOf(online) {
		return invalid(set.String(), "CPUs %s are not online on this node (online: %s); power.%s left untouched",
			set.Difference(online), online, c.name)
	}
	return set, true
}

// gaps are the CPUs of a class that cannot take a setting, by reason.
type gaps struct {
	noQoS, noFreq cpuset.CPUSet
	notOffered    map[string][]int // available governors → CPUs
}

func (r *renderer) class(c class, cpus cpuset.CPUSet) {
	g := gaps{noQoS: cpuset.New(), noFreq: cpuset.New(), notOffered: map[string][]int{}}
	for _, cpu := range cpus.List() {
		if d := c.spec.MaxIdleExitLatency; d != nil {
			r.idle(cpu, limitUS(d.Duration), &g)
		}
		if c.spec.Governor != nil {
			r.governor(c.name, cpu, string(*c.spec.Governor), &g)
		}
	}
	if !g.noQoS.IsEmpty() {
		r.results = append(r.results, v1alpha1.SettingResult{Setting: knobs.PowerClassID(c.name, knobs.ResumeLatencyLeaf),
			Desired: c.spec.MaxIdleExitLatency.Duration.String(), State: v1alpha1.SettingUnsupported,
			Message: fmt.Sprintf("CPUs %s have no power/pm_qos_resume_latency_us (kernel without per-CPU PM QoS); only cpuidle disable files, where the CPU has states, limit its idle", g.noQoS)})
	}
	if !g.noFreq.IsEmpty() {
		r.results = append(r.results, v1alpha1.SettingResult{Setting: knobs.PowerClassID(c.name, knobs.GovernorLeaf),
			Desired: string(*c.spec.Governor), State: v1alpha1.SettingUnsupported,
			Message: fmt.Sprintf("CPUs %s have no cpufreq (no cpufreq driver, as in most VMs): the frequency is not the kernel's to set", g.noFreq)})
	}
	for _, avail := range slices.Sorted(maps.Keys(g.notOffered)) {
		list := g.notOffered[avail]
		r.results = append(r.results, v1alpha1.SettingResult{Setting: knobs.PowerClassID(c.name, knobs.GovernorLeaf),
			Desired: string(*c.spec.Governor), State: v1alpha1.SettingUnsupported,
			Message: fmt.Sprintf("the cpufreq driver of CPUs %s offers only %q", cpuset.New(list...), avail)})
	}
}

// limitUS is a maxIdleExitLatency in whole microseconds, rounded down (a
// stricter limit); negative durations (refused by the CRD) count as 0.
func limitUS(d time.Duration) uint64 {
	if d < 0 {
		return 0
	}
	return uint64(d / time.Microsecond)
}

// idle adds the PM QoS knob of cpu and a disable knob for each of its idle
// states deeper than the limit.
func (r *renderer) idle(cpu int, us uint64, g *gaps) {
	id := strconv.Itoa(cpu)
	if path := cpuDir(r.root, cpu, "power", "pm_qos_resume_latency_us"); r.root.Exists(path) {
		r.knobs = append(r.knobs, knob.Knob{ID: knobs.PowerID(id, knobs.ResumeLatencyLeaf), Path: path,
			Desired: resumeLatencyValue(us), Label: fmt.Sprintf("CPU %d PM QoS resume latency (µs; n/a = polling only)", cpu)})
	} else {
		g.noQoS = g.noQoS.Union(cpuset.New(cpu))
	}
	for _, st := range idleStates(r.root, cpu) {
		if st.latencyUS <= us {
			continue
		}
		r.knobs = append(r.knobs, knob.Knob{ID: knobs.PowerID(id, knobs.IdleDisableLeaf(st.index)),
			Path: cpuDir(r.root, cpu, "cpuidle", "state"+st.index, "disable"), Desired: "1",
			Label: fmt.Sprintf("CPU %d idle state %s (%s, exit latency %dµs)", cpu, st.index, st.name, st.latencyUS)})
	}
}

// governor adds the scaling_governor knob of cpu's cpufreq policy, once per
// policy: CPUs sharing a policy share one governor, so two classes asking
// different governors of one policy is Invalid.
func (r *renderer) governor(cls string, cpu int, want string, g *gaps) {
	dir := cpuDir(r.root, cpu, "cpufreq")
	path := dir + "/scaling_governor"
	if !r.root.Exists(path) {
		g.noFreq = g.noFreq.Union(cpuset.New(cpu))
		return
	}
	key, err := filepath.EvalSymlinks(dir)
	if err != nil {
		key = dir
	}
	if prev, seen := r.policies[key]; seen {
		if prev.governor != want {
			r.results = append(r.results, v1alpha1.SettingResult{Setting: knobs.PowerID(strconv.Itoa(cpu), knobs.GovernorLeaf),
				Desired: want, Actual: prev.governor, State: v1alpha1.SettingInvalid,
				Message: fmt.Sprintf("CPU %d shares its cpufreq policy with CPU %d, which power.%s sets to %s; one policy has one governor", cpu, prev.cpu, prev.class, prev.governor)})
		}
		return
	}
	r.policies[key] = policy{cpu: cpu, class: cls, governor: want}
	if avail, err := r.root.ReadString(dir + "/scaling_available_governors"); err == nil && !slices.Contains(strings.Fields(avail), want) {
		g.notOffered[avail] = append(g.notOffered[avail], cpu)
		return
	}
	label := fmt.Sprintf("CPU %d cpufreq governor", cpu)
	if shared, err := r.root.ReadString(dir + "/affected_cpus"); err == nil && strings.Contains(shared, " ") {
		label += " (policy of CPUs " + shared + ")"
	}
	r.knobs = append(r.knobs, knob.Knob{ID: knobs.PowerID(strconv.Itoa(cpu), knobs.GovernorLeaf), Path: path, Desired: want, Label: label})
}
