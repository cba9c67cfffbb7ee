package cpuquota

import (
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

// BurstKnobs returns, for every opted-in pod, one knob setting the CFS
// burst of the pod cgroup followed by one per container cgroup: percent
// (v1alpha1.BurstPercentMin..Max) of the cgroup's own quota, read now. The
// quota stays kubelet's; only the burst is the agent's, and it reverts to
// its original (0 on a host where nobody else sets one).
//
// The kernel's rule (kernel/sched/core.c, tg_set_cfs_bandwidth, 5.14+):
// with a finite quota, burst <= quota, or EINVAL; and a write of either
// file is checked against the other's current value. So whoever lowers
// the quota must lower the burst first, and whoever raises the burst must
// raise the quota first. The agent never writes the quota under Burst;
// the orders it keeps are these:
//   - a burst is derived from the quota the cgroup holds, so it is never
//     above it; after kubelet raises the quota (an in-place resize up),
//     the next pass raises the burst from the new quota;
//   - while kubelet resizes the pod (Pod.Resizing) the burst is 0, so
//     kubelet's lower quota is accepted (with the old burst the kernel
//     would refuse it and kubelet's resize would fail); after the resize
//     the burst is derived from the new quota;
//   - a switch from Remove restores the quota (the engine restores
//     dropped settings before it writes new ones) before any burst; a
//     cgroup without a quota gets no knob (a burst limits nothing there),
//     so its burst comes on the pass after;
//   - a revert writes 0, which every quota accepts.
//
// A pod whose cgroups cannot be found yields a Failed result, a kernel
// without burst files (before 5.14) an Unsupported one.
func BurstKnobs(root *host.Root, pods []podcgroup.Pod, percent int64, opts ...podcgroup.Option) ([]knob.Knob, []v1alpha1.SettingResult, error) {
	if percent < v1alpha1.BurstPercentMin || percent > v1alpha1.BurstPercentMax {
		return nil, nil, fmt.Errorf("cpuQuota.burstPercent %d is outside %d..%d", percent, v1alpha1.BurstPercentMin, v1alpha1.BurstPercentMax)
	}
	if _, _, err := podcgroup.ControllerDir(root, "cpu"); err != nil {
		return nil, nil, fmt.Errorf("finding the cpu controller: %w", err)
	}
	var knobs []knob.Knob
	var results []v1alpha1.SettingResult
	for _, p := range pods {
		if !p.OptedIn {
			continue
		}
		k, res := podBurstKnobs(root, p, percent, opts)
		knobs = append(knobs, k...)
		results = append(results, res...)
	}
	return knobs, results, nil
}

// BurstID is the setting name of a pod's burst knob: "cpuburst/<namespace>/
// <name>/<uid>"; its containers' knobs add "/<short container ID>".
func BurstID(p podcgroup.Pod) string {
	return settingid.Pod(settingid.CPUBurst, p.Namespace, p.Name, p.UID)
}

func podBurstKnobs(root *host.Root, p podcgroup.Pod, percent int64, opts []podcgroup.Option) ([]knob.Knob, []v1alpha1.SettingResult) {
	id := BurstID(p)
	dirs, res := findPod(root, p, id, opts)
	if dirs == nil {
		return nil, res
	}
	var knobs []knob.Knob
	var results []v1alpha1.SettingResult
	add := func(kid, dir string) {
		k, ok, err := burstKnob(root, dirs.Version, kid, dir, percent, p.Resizing)
		switch {
		case err != nil:
			results = append(results, failure(kid, err))
		case ok:
			knobs = append(knobs, k)
		}
	}
	add(id, dirs.Pod)
	for _, c := range dirs.Containers {
		add(id+"/"+podcgroup.Key(c), c)
	}
	return knobs, results
}

// burstKnob builds the knob setting one cgroup's burst; false (no knob)
// for a cgroup without a quota.
func burstKnob(root *host.Root, version int, id, dir string, percent int64, resizing bool) (knob.Knob, bool, error) {
	path := filepath.Join(dir, cgstat.BurstFileV1)
	if version == 2 {
		path = filepath.Join(dir, cgstat.BurstFileV2)
	}
	quota, err := cgstat.Quota(root, version, dir)
	if err != nil {
		return knob.Knob{}, false, kerr.Classify("read", dir, fmt.Errorf("reading the CFS quota: %w", err))
	}
	if !root.Exists(path) {
		return knob.Knob{}, false, kerr.Classify("read", path,
			fmt.Errorf("the kernel has no %s: CFS burst needs Linux 5.14 or later: %w", filepath.Base(path), fs.ErrNotExist))
	}
	if quota < 0 {
		return knob.Knob{}, false, nil
	}
	burst := BurstOf(quota, percent)
	if resizing {
		burst = 0
	}
	return knob.Knob{ID: id, Path: path, Desired: strconv.FormatInt(burst, 10), Equal: equalInt,
		Label: fmt.Sprintf("CFS burst of %s (quota %d µs)", filepath.Base(dir), quota)}, true, nil
}

// BurstOf is percent of quota (µs per period), never above it.
func BurstOf(quota, percent int64) int64 {
	return min(quota*percent/100, quota)
}

// equalInt compares integer file values numerically.
func equalInt(actual, want string) bool {
	a, errA := strconv.ParseInt(strings.TrimSpace(actual), 10, 64)
	w, errW := strconv.ParseInt(strings.TrimSpace(want), 10, 64)
	if errA != nil || errW != nil {
		return strings.TrimSpace(actual) == strings.TrimSpace(want)
	}
	return a == w
}
