// Package cpuquota removes CFS bandwidth limits from the pods that opt in:
// cgroup v1 cpu.cfs_quota_us = -1, cgroup v2 cpu.max = "max <period>", at pod
// AND container level (removing only the container's limit still throttles
// at the pod); or, with policy Burst, keeps the limits and sets a CFS burst
// (burst.go). It turns opted-in pods into knobs; the plan/journal machinery
// applies, re-asserts and reverts them.
package cpuquota

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"latencytier.io/latencytier/agent/cgstat"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

// Knobs returns, for every opted-in pod, one knob for the pod cgroup followed
// by one per container cgroup, each removing the limit.
//
// Order: pod first, containers after, so a revert (reverse order) restores
// the containers while the pod is still unlimited and the pod last. In cgroup
// v1 the kernel rejects a quota (per period) above the parent's; a child at
// -1 inherits the parent's. Applying: writing -1 is always legal. Reverting:
// each container goes back under an unlimited pod (always legal), then the
// pod goes back to a quota that the original containers already satisfied
// (kubelet and the runtime only ever create children within the pod's
// limit). Cgroup v2 has no such rule; the same order is used.
//
// A pod whose cgroup cannot be found, or whose cgroup has no cpu controller,
// yields a SettingResult instead of knobs; only a host without any cgroup
// filesystem is an error.
func Knobs(root *host.Root, pods []podcgroup.Pod, opts ...podcgroup.Option) ([]knob.Knob, []v1alpha1.SettingResult, error) {
	if _, _, err := podcgroup.ControllerDir(root, "cpu"); err != nil {
		return nil, nil, fmt.Errorf("finding the cpu controller: %w", err)
	}
	var knobs []knob.Knob
	var results []v1alpha1.SettingResult
	for _, p := range pods {
		if !p.OptedIn {
			continue
		}
		k, res := podKnobs(root, p, opts)
		knobs = append(knobs, k...)
		results = append(results, res...)
	}
	return knobs, results, nil
}

// PodID is the setting name of a pod's quota knob: "cpuquota/<namespace>/
// <name>/<uid>"; its containers' knobs add "/<short container ID>". The UID
// keeps two incarnations of one name apart (a StatefulSet pod deleted and
// recreated between two passes): each keeps its own journal entry and
// original. Journals written before the UID was part of the ID hold
// "cpuquota/<namespace>/<name>[/<container>]": no knob names those any
// more, so the engine restores them like any setting the spec dropped (a
// pod still opted in is tuned again in the same pass, its original
// journaled anew) and revert restores them as they are.
func PodID(p podcgroup.Pod) string {
	return settingid.Pod(settingid.CPUQuota, p.Namespace, p.Name, p.UID)
}

func podKnobs(root *host.Root, p podcgroup.Pod, opts []podcgroup.Option) ([]knob.Knob, []v1alpha1.SettingResult) {
	id := PodID(p)
	dirs, res := findPod(root, p, id, opts)
	if dirs == nil {
		return nil, res
	}
	var knobs []knob.Knob
	var results []v1alpha1.SettingResult
	add := func(kid, dir string) {
		k, err := dirKnob(root, dirs.Version, kid, dir)
		if err != nil {
			results = append(results, failure(kid, err))
			return
		}
		knobs = append(knobs, k)
	}
	add(id, dirs.Pod)
	for _, c := range dirs.Containers {
		add(id+"/"+podcgroup.Key(c), c)
	}
	return knobs, results
}

// findPod finds p's cgroups; nil and a Failed result for setting id when
// they cannot be found.
func findPod(root *host.Root, p podcgroup.Pod, id string, opts []podcgroup.Option) (*podcgroup.Dirs, []v1alpha1.SettingResult) {
	dirs, err := podcgroup.Find(root, p.UID, opts...)
	if errors.Is(err, podcgroup.ErrNotFound) {
		return nil, []v1alpha1.SettingResult{{Setting: id, State: v1alpha1.SettingFailed,
			Message: fmt.Sprintf("no cgroup for pod uid %s (searched cgroupfs and systemd layouts, all QoS classes): the pod has not started here yet, or kubelet uses another cgroup root", p.UID)}}
	}
	if err != nil {
		return nil, []v1alpha1.SettingResult{{Setting: id, State: v1alpha1.SettingFailed, Message: err.Error()}}
	}
	return dirs, nil
}

func failure(id string, err error) v1alpha1.SettingResult {
	state := v1alpha1.SettingFailed
	if kerr.ClassOf(err) == kerr.Unsupported {
		state = v1alpha1.SettingUnsupported
	}
	return v1alpha1.SettingResult{Setting: id, State: state, Message: err.Error()}
}

// dirKnob builds the knob removing the limit of one cgroup directory.
func dirKnob(root *host.Root, version int, id, dir string) (knob.Knob, error) {
	if version == 1 {
		path := filepath.Join(dir, cgstat.QuotaFileV1)
		if !root.Exists(path) {
			return knob.Knob{}, kerr.Classify("read", path, fmt.Errorf("cpu controller has no CFS bandwidth file: %w", fs.ErrNotExist))
		}
		return knob.Knob{ID: id, Path: path, Desired: cgstat.UnlimitedV1, Equal: equalV1, OriginalFollowsWriter: true}, nil
	}
	path := filepath.Join(dir, cgstat.MaxFileV2)
	cur, err := root.ReadString(path)
	if err != nil {
		return knob.Knob{}, kerr.Classify("read", path, fmt.Errorf("cpu controller not enabled for this cgroup: %w", err))
	}
	_, period, err := cgstat.ParseMax(cur)
	if err == nil && period == 0 {
		err = fmt.Errorf("cpu.max %q has no period", cur)
	}
	if err != nil {
		return knob.Knob{}, kerr.Classify("read", path, err)
	}
	return knob.Knob{ID: id, Path: path, Desired: "max " + strconv.FormatInt(period, 10), Equal: equalV2, OriginalFollowsWriter: true}, nil
}

// equalV1 compares cpu.cfs_quota_us values numerically; every negative
// quota means unlimited.
func equalV1(actual, want string) bool {
	a, errA := strconv.ParseInt(strings.TrimSpace(actual), 10, 64)
	w, errW := strconv.ParseInt(strings.TrimSpace(want), 10, 64)
	if errA != nil || errW != nil {
		return strings.TrimSpace(actual) == strings.TrimSpace(want)
	}
	if a < 0 && w < 0 {
		return true
	}
	return a == w
}

// equalV2 compares cpu.max values. Two unlimited values are equal whatever
// their periods (a period without a quota limits nothing, so a period
// change alone is not drift); limited values must match in quota and period.
// A value without a period ("max") matches on quota alone.
func equalV2(actual, want string) bool {
	qa, pa, errA := cgstat.ParseMax(actual)
	qw, pw, errW := cgstat.ParseMax(want)
	if errA != nil || errW != nil {
		return strings.TrimSpace(actual) == strings.TrimSpace(want)
	}
	if qa != qw {
		return false
	}
	return qa < 0 || pa == 0 || pw == 0 || pa == pw
}
