// Package cpuset confines system services (system.slice, user.slice,
// init.scope) to the reserved housekeeping CPUs and keeps opted-in pods on
// the isolated CPUs, through cpuset.cpus in the cgroup v1 cpuset hierarchy or
// the cgroup v2 unified tree. It produces knobs; it never creates a cgroup
// (systemd and kubelet own them) and never overrides placement that
// kubelet's static CPU manager owns.
package cpuset

import (
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

// CPUsFile is the cpuset controller's CPU list.
const CPUsFile = "cpuset.cpus"

// SystemSlices are the cgroups of system services, relative to the
// hierarchy root.
var SystemSlices = []string{"system.slice", "user.slice", "init.scope"}

// Option changes what Knobs confines.
type Option func(*options)

type options struct {
	slices []string
}

// WithSlices replaces SystemSlices (tests confine their own cgroups).
func WithSlices(names ...string) Option {
	return func(o *options) { o.slices = names }
}

// Knobs confines the system slices to reserved.
//
// cgroup v1: every child's cpuset must stay a subset of its parent's, so a
// slice is confined with all its descendants, deepest first: each child is
// shrunk while its parent is still wide, the slice last. Revert (reverse
// order) widens the slice first and then its children. A descendant keeps
// the part of its own CPUs that stays allowed; one left with none gets its
// parent's set. A slice missing from the cpuset hierarchy (systemd does not
// manage cpusets on v1) is reported, not created.
//
// cgroup v2: only the slice's cpuset.cpus is set (children are clamped by
// the kernel). When the slice has no cpuset.cpus because the root does not
// enable the cpuset controller for its children, the first pass returns a
// knob writing "+cpuset" to the root's cgroup.subtree_control and a result
// saying so; the slices follow on the next pass.
func Knobs(root *host.Root, reserved cpuset.CPUSet, opts ...Option) ([]knob.Knob, []v1alpha1.SettingResult, error) {
	o := options{slices: SystemSlices}
	for _, f := range opts {
		f(&o)
	}
	if reserved.IsEmpty() {
		return nil, nil, fmt.Errorf("reserved CPU set is empty")
	}
	base, version, err := podcgroup.ControllerDir(root, "cpuset")
	if err != nil {
		return nil, nil, fmt.Errorf("finding the cpuset controller: %w", err)
	}
	if version == 2 {
		k, res := v2Knobs(root, base, o.slices, reserved)
		return k, res, nil
	}
	var knobs []knob.Knob
	var results []v1alpha1.SettingResult
	for _, s := range o.slices {
		id := settingid.CPUSet.ID(s)
		if !root.IsDir(filepath.Join(base, s)) {
			results = append(results, v1alpha1.SettingResult{Setting: id, Desired: reserved.String(), State: v1alpha1.SettingUnsupported,
				Message: fmt.Sprintf("%s does not exist in the cgroup v1 cpuset hierarchy %s (systemd manages cpusets only on cgroup v2); not created", s, base)})
			continue
		}
		k, err := confineV1(root, base, s, prefixed(settingid.CPUSet.Prefix()), reserved)
		if err != nil {
			results = append(results, v1alpha1.SettingResult{Setting: id, Desired: reserved.String(), State: v1alpha1.SettingFailed, Message: err.Error()})
			continue
		}
		knobs = append(knobs, k...)
	}
	return knobs, results, nil
}

// confineV1 returns the knobs confining the v1 cgroup rel (under base) to
// want, descendants first. id names the knob of each cgroup by its path
// relative to base.
func confineV1(root *host.Root, base, rel string, id func(rel string) string, want cpuset.CPUSet) ([]knob.Knob, error) {
	var knobs []knob.Knob
	var walk func(rel string, want cpuset.CPUSet) error
	walk = func(rel string, want cpuset.CPUSet) error {
		dir := filepath.Join(base, rel)
		kids, err := root.Subdirs(dir)
		if err != nil {
			return fmt.Errorf("listing %s: %w", dir, err)
		}
		for _, kid := range kids {
			cur, err := readCPUs(root, filepath.Join(dir, kid, CPUsFile))
			if err != nil {
				return err
			}
			kidWant := cur.Intersection(want)
			if kidWant.IsEmpty() {
				kidWant = want
			}
			if err := walk(filepath.Join(rel, kid), kidWant); err != nil {
				return err
			}
		}
		knobs = append(knobs, knob.Knob{ID: id(rel), Path: filepath.Join(dir, CPUsFile), Desired: want.String(), Equal: cpulist.Equal})
		return nil
	}
	return knobs, walk(rel, want)
}

func prefixed(prefix string) func(string) string {
	return func(rel string) string { return prefix + rel }
}

func v2Knobs(root *host.Root, base string, slices []string, reserved cpuset.CPUSet) ([]knob.Knob, []v1alpha1.SettingResult) {
	var knobs []knob.Knob
	var results []v1alpha1.SettingResult
	var waiting []string
	for _, s := range slices {
		id := settingid.CPUSet.ID(s)
		dir := filepath.Join(base, s)
		switch {
		case !root.IsDir(dir):
			results = append(results, v1alpha1.SettingResult{Setting: id, Desired: reserved.String(), State: v1alpha1.SettingUnsupported,
				Message: fmt.Sprintf("%s does not exist under %s; not created", s, base)})
		case root.Exists(filepath.Join(dir, CPUsFile)):
			knobs = append(knobs, knob.Knob{ID: id, Path: filepath.Join(dir, CPUsFile), Access: Access, Desired: reserved.String(), Equal: cpulist.Equal})
		default:
			waiting = append(waiting, s)
		}
	}
	if len(waiting) == 0 {
		return knobs, results
	}
	k, res := enableV2(root, base, waiting, reserved)
	return append(k, knobs...), append(results, res...)
}

// enableV2 enables the cpuset controller for the root's children, for the
// slices that lack cpuset.cpus.
func enableV2(root *host.Root, base string, waiting []string, reserved cpuset.CPUSet) ([]knob.Knob, []v1alpha1.SettingResult) {
	var results []v1alpha1.SettingResult
	ctrl, err := root.ReadString(filepath.Join(base, "cgroup.controllers"))
	if err != nil || !hasToken(ctrl, "cpuset") {
		for _, s := range waiting {
			results = append(results, v1alpha1.SettingResult{Setting: settingid.CPUSet.ID(s), Desired: reserved.String(), State: v1alpha1.SettingUnsupported,
				Message: fmt.Sprintf("the cpuset controller is not available in the cgroup v2 root %s (cgroup.controllers: %q)", base, ctrl)})
		}
		return nil, results
	}
	for _, s := range waiting {
		results = append(results, v1alpha1.SettingResult{Setting: settingid.CPUSet.ID(s), Desired: reserved.String(), State: v1alpha1.SettingFailed,
			Message: fmt.Sprintf("%s has no cpuset.cpus yet: the agent enables the cpuset controller in %s/cgroup.subtree_control (setting %s) and confines it on the next pass", s, base, subtreeID)})
	}
	return []knob.Knob{subtreeKnob(base)}, results
}

// subtreeID is the setting name of the root's cpuset controller enablement.
var subtreeID = settingid.CPUSet.ID("cgroup.subtree_control")

// subtreeKnob enables the cpuset controller in dir's cgroup.subtree_control.
// The file reads "cpu io memory" but takes "+cpuset"/"-cpuset", so the knob
// compares by token and restores with "-cpuset" when cpuset was off.
func subtreeKnob(dir string) knob.Knob {
	return knob.Knob{
		ID:      subtreeID,
		Path:    filepath.Join(dir, "cgroup.subtree_control"),
		Desired: "+cpuset",
		Equal:   subtreeEqual,
		Restore: func(read string) string {
			if hasToken(read, "cpuset") {
				return "+cpuset"
			}
			return "-cpuset"
		},
	}
}

// subtreeEqual compares cgroup.subtree_control values by the one thing the
// knob manages: whether the cpuset controller is on. A value is either what
// the file reads ("cpu cpuset io") or a write form ("+cpuset", "-cpuset").
func subtreeEqual(actual, want string) bool {
	return cpusetOn(actual) == cpusetOn(want)
}

func cpusetOn(s string) bool {
	switch strings.TrimSpace(s) {
	case "+cpuset":
		return true
	case "-cpuset":
		return false
	}
	return hasToken(s, "cpuset")
}

func hasToken(s, tok string) bool {
	for _, f := range strings.Fields(s) {
		if f == tok {
			return true
		}
	}
	return false
}

func readCPUs(root *host.Root, path string) (cpuset.CPUSet, error) {
	b, err := root.ReadFile(path)
	if err != nil {
		return cpuset.CPUSet{}, err
	}
	s, err := cpulist.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return cpuset.CPUSet{}, fmt.Errorf("parsing %s: %w", path, err)
	}
	return s, nil
}
