package cpuquota

import (
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/cgstat"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
)

// Burst under v2 (systemd layout): a knob per cgroup with a quota, at
// percent of that cgroup's own quota; a container without a quota (the
// sandbox) gets none, as a burst limits nothing there.
func TestBurstKnobsV2(t *testing.T) {
	podRel := "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc + ".slice"
	ctrRel := podRel + "/cri-containerd-" + cid + ".scope"
	sandbox := podRel + "/cri-containerd-" + strings.Repeat("f", 64) + ".scope"
	root := testroot.Lines(t, map[string]string{
		"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids",
		podRel + "/cpu.max":                "150000 100000",
		podRel + "/cpu.max.burst":          "0",
		ctrRel + "/cpu.max":                "100000 100000",
		ctrRel + "/cpu.max.burst":          "0",
		sandbox + "/cpu.max":               "max 100000",
		sandbox + "/cpu.max.burst":         "0",
	})
	knobs, results, err := BurstKnobs(root, []podcgroup.Pod{pod(true), {UID: "other", Name: "not-opted-in"}}, 50)
	if err != nil || len(results) != 0 {
		t.Fatalf("BurstKnobs: %v %v", results, err)
	}
	want := []struct{ id, rel, desired string }{
		{"cpuburst/shop/checkout/" + uid, podRel + "/cpu.max.burst", "75000"},
		{"cpuburst/shop/checkout/" + uid + "/" + cid[:12], ctrRel + "/cpu.max.burst", "50000"},
	}
	if len(knobs) != len(want) {
		t.Fatalf("knobs = %+v", knobs)
	}
	for i, w := range want {
		k := knobs[i]
		if k.ID != w.id || k.Path != root.Path(w.rel) || k.Desired != w.desired {
			t.Errorf("knob %d = %s %s %q; want %s %s %q", i, k.ID, k.Path, k.Desired, w.id, w.rel, w.desired)
		}
		if k.OriginalFollowsWriter {
			t.Errorf("knob %s follows another writer: the burst is the agent's, its original stays the one it found", k.ID)
		}
	}
}

// Under v1 the burst is cpu.cfs_burst_us; 100% is the quota itself.
func TestBurstKnobsV1(t *testing.T) {
	podRel := "sys/fs/cgroup/cpu,cpuacct/kubepods/burstable/pod" + uid
	root := testroot.Lines(t, map[string]string{
		podRel + "/" + cgstat.QuotaFileV1:             "200000",
		podRel + "/" + cgstat.BurstFileV1:             "0",
		podRel + "/" + cid + "/" + cgstat.QuotaFileV1: "200000",
		podRel + "/" + cid + "/" + cgstat.BurstFileV1: "0",
	})
	knobs, results, err := BurstKnobs(root, []podcgroup.Pod{pod(true)}, v1alpha1.BurstPercentMax)
	if err != nil || len(results) != 0 || len(knobs) != 2 {
		t.Fatalf("BurstKnobs: %+v %v %v", knobs, results, err)
	}
	if knobs[0].Path != root.Path(podRel, cgstat.BurstFileV1) || knobs[0].Desired != "200000" || knobs[1].Desired != "200000" {
		t.Fatalf("knobs = %+v", knobs)
	}
}

// While kubelet resizes the pod, the burst is 0: kubelet's lower quota
// would be refused (EINVAL) above the burst, so the agent gets out of the
// way; the pass after the resize derives the burst from the new quota.
func TestBurstYieldsToAResize(t *testing.T) {
	podRel := "sys/fs/cgroup/cpu/kubepods/burstable/pod" + uid
	root := testroot.Lines(t, map[string]string{
		podRel + "/" + cgstat.QuotaFileV1: "400000",
		podRel + "/" + cgstat.BurstFileV1: "400000",
	})
	p := pod(true)
	p.Resizing = true
	knobs, _, err := BurstKnobs(root, []podcgroup.Pod{p}, 100)
	if err != nil || len(knobs) != 1 || knobs[0].Desired != "0" {
		t.Fatalf("during a resize: %+v %v; want one knob at 0", knobs, err)
	}
	testroot.Write(t, root.Path(podRel, cgstat.QuotaFileV1), "100000")
	p.Resizing = false
	knobs, _, _ = BurstKnobs(root, []podcgroup.Pod{p}, 100)
	if len(knobs) != 1 || knobs[0].Desired != "100000" {
		t.Fatalf("after the resize to 1 CPU: %+v; want the burst from the new quota, 100000", knobs)
	}
}

func TestBurstKnobsResults(t *testing.T) {
	t.Run("kernel without burst", func(t *testing.T) {
		podRel := "sys/fs/cgroup/cpu/kubepods/pod" + uid
		root := testroot.Lines(t, map[string]string{podRel + "/" + cgstat.QuotaFileV1: "100000"})
		knobs, results, err := BurstKnobs(root, []podcgroup.Pod{pod(true)}, 100)
		if err != nil || len(knobs) != 0 || len(results) != 1 {
			t.Fatalf("got %v %v %v", knobs, results, err)
		}
		if r := results[0]; r.State != v1alpha1.SettingUnsupported || !strings.Contains(r.Message, "5.14") || r.Setting != "cpuburst/shop/checkout/"+uid {
			t.Errorf("result = %+v; want Unsupported naming Linux 5.14", r)
		}
	})
	t.Run("pod cgroup missing", func(t *testing.T) {
		root := testroot.Lines(t, map[string]string{"sys/fs/cgroup/cpu/kubepods/": "/"})
		_, results, err := BurstKnobs(root, []podcgroup.Pod{pod(true)}, 100)
		if err != nil || len(results) != 1 || results[0].State != v1alpha1.SettingFailed || results[0].Setting != "cpuburst/shop/checkout/"+uid {
			t.Fatalf("got %+v %v", results, err)
		}
	})
	t.Run("percent out of bounds", func(t *testing.T) {
		root := testroot.Lines(t, map[string]string{"sys/fs/cgroup/cpu/kubepods/": "/"})
		for _, pc := range []int64{0, 101} {
			if _, _, err := BurstKnobs(root, []podcgroup.Pod{pod(true)}, pc); err == nil || !strings.Contains(err.Error(), "burstPercent") {
				t.Errorf("percent %d: err %v; want one naming burstPercent", pc, err)
			}
		}
	})
}

// The kernel caps a burst at the quota: no percentage gets above it.
func TestBurstOf(t *testing.T) {
	for _, tc := range []struct{ quota, percent, want int64 }{
		{100000, 100, 100000}, {100000, 50, 50000}, {1000, 1, 10}, {150000, 33, 49500}, {100000, 200, 100000},
	} {
		if got := BurstOf(tc.quota, tc.percent); got != tc.want {
			t.Errorf("BurstOf(%d, %d) = %d, want %d", tc.quota, tc.percent, got, tc.want)
		}
	}
}
