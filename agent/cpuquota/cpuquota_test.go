package cpuquota

import (
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/cgstat"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
)

const (
	uid = "1b4f0c5e-9d7a-4b1e-8f00-0123456789ab"
	esc = "1b4f0c5e_9d7a_4b1e_8f00_0123456789ab"
	cid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func pod(optedIn bool) podcgroup.Pod {
	return podcgroup.Pod{UID: uid, Namespace: "shop", Name: "checkout", OptedIn: optedIn}
}

func TestKnobsV2Systemd(t *testing.T) {
	podRel := "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc + ".slice"
	root := testroot.Lines(t, map[string]string{
		"sys/fs/cgroup/cgroup.controllers":                                       "cpuset cpu io memory pids",
		podRel + "/cpu.max":                                                      "150000 50000",
		podRel + "/cri-containerd-" + cid + ".scope/cpu.max":                     "100000 50000",
		podRel + "/cri-containerd-" + strings.Repeat("f", 64) + ".scope/cpu.max": "max 100000",
	})
	knobs, results, err := Knobs(root, []podcgroup.Pod{pod(true)})
	if err != nil || len(results) != 0 {
		t.Fatalf("Knobs: %v %v", results, err)
	}
	want := []struct{ id, rel, desired string }{
		{"cpuquota/shop/checkout/" + uid, podRel + "/cpu.max", "max 50000"},
		{"cpuquota/shop/checkout/" + uid + "/" + cid[:12], podRel + "/cri-containerd-" + cid + ".scope/cpu.max", "max 50000"},
		{"cpuquota/shop/checkout/" + uid + "/ffffffffffff", podRel + "/cri-containerd-" + strings.Repeat("f", 64) + ".scope/cpu.max", "max 100000"},
	}
	if len(knobs) != len(want) {
		t.Fatalf("knobs = %+v", knobs)
	}
	for i, w := range want {
		k := knobs[i]
		if k.ID != w.id || k.Path != root.Path(w.rel) || k.Desired != w.desired {
			t.Errorf("knob %d = %s %s %q; want %s %s %q", i, k.ID, k.Path, k.Desired, w.id, w.rel, w.desired)
		}
	}
	// The already-unlimited container is settled; the limited ones are not.
	if !knobs[2].Matches("max 100000", knobs[2].Desired) || knobs[1].Matches("100000 50000", knobs[1].Desired) {
		t.Error("Matches does not tell limited from unlimited")
	}
}

func TestKnobsV1Systemd(t *testing.T) {
	podRel := "sys/fs/cgroup/cpu,cpuacct/kubepods.slice/kubepods-pod" + esc + ".slice"
	root := testroot.Lines(t, map[string]string{
		"sys/fs/cgroup/unified/cgroup.controllers":                      "",
		podRel + "/cpu.cfs_quota_us":                                    "200000",
		podRel + "/cri-containerd-" + cid + ".scope/cpu.cfs_quota_us":   "200000",
		"sys/fs/cgroup/cpu,cpuacct/kubepods.slice/kubepods-podx.slice/": "/",
	})
	knobs, results, err := Knobs(root, []podcgroup.Pod{pod(true)})
	if err != nil || len(results) != 0 || len(knobs) != 2 {
		t.Fatalf("Knobs: %+v %v %v", knobs, results, err)
	}
	if knobs[0].Path != root.Path(podRel, cgstat.QuotaFileV1) || knobs[0].Desired != "-1" || knobs[1].ID != "cpuquota/shop/checkout/"+uid+"/"+cid[:12] {
		t.Fatalf("knobs = %+v", knobs)
	}
}

func TestKnobsResults(t *testing.T) {
	t.Run("not opted in", func(t *testing.T) {
		root := testroot.Lines(t, map[string]string{"sys/fs/cgroup/cpu/kubepods/pod" + uid + "/cpu.cfs_quota_us": "100000"})
		knobs, results, err := Knobs(root, []podcgroup.Pod{pod(false)})
		if err != nil || len(knobs) != 0 || len(results) != 0 {
			t.Fatalf("got %v %v %v; want nothing", knobs, results, err)
		}
	})
	t.Run("pod cgroup missing", func(t *testing.T) {
		root := testroot.Lines(t, map[string]string{"sys/fs/cgroup/cpu/kubepods/": "/"})
		knobs, results, err := Knobs(root, []podcgroup.Pod{pod(true)})
		if err != nil || len(knobs) != 0 || len(results) != 1 {
			t.Fatalf("got %v %v %v", knobs, results, err)
		}
		r := results[0]
		if r.Setting != "cpuquota/shop/checkout/"+uid || r.State != v1alpha1.SettingFailed || !strings.Contains(r.Message, uid) {
			t.Fatalf("result = %+v", r)
		}
	})
	t.Run("v2 without cpu controller in the pod", func(t *testing.T) {
		podRel := "sys/fs/cgroup/kubepods/burstable/pod" + uid
		root := testroot.Lines(t, map[string]string{
			"sys/fs/cgroup/cgroup.controllers":   "memory pids",
			podRel + "/cgroup.procs":             "",
			podRel + "/" + cid + "/cgroup.procs": "",
		})
		knobs, results, err := Knobs(root, []podcgroup.Pod{pod(true)})
		if err != nil || len(knobs) != 0 || len(results) != 2 {
			t.Fatalf("got %v %v %v", knobs, results, err)
		}
		for _, r := range results {
			if r.State != v1alpha1.SettingUnsupported || !strings.Contains(r.Message, "cpu controller not enabled") {
				t.Errorf("result = %+v", r)
			}
		}
	})
	t.Run("no cgroup filesystem", func(t *testing.T) {
		root := testroot.Lines(t, map[string]string{"proc/": "/"})
		if _, _, err := Knobs(root, []podcgroup.Pod{pod(true)}); err == nil {
			t.Fatal("want an error without any cgroup filesystem")
		}
	})
}

func TestEqual(t *testing.T) {
	v1 := []struct {
		a, b string
		want bool
	}{
		{"-1", "-1", true},
		{"-1\n", "-1", true},
		{"-5", "-1", true},
		{"100000", "-1", false},
		{"100000", "100000", true},
		{"junk", "-1", false},
	}
	for _, tt := range v1 {
		if got := equalV1(tt.a, tt.b); got != tt.want {
			t.Errorf("equalV1(%q,%q) = %v", tt.a, tt.b, got)
		}
	}
	v2 := []struct {
		a, b string
		want bool
	}{
		{"max 100000", "max 100000", true},
		{"max 50000", "max 100000", true},
		{"max", "max 100000", true},
		{"50000 100000", "max 100000", false},
		{"50000 100000", "50000 100000", true},
		{"50000 100000", "50000 50000", false},
		{"50000 100000", "050000  100000\n", true},
		{"", "max 100000", false},
	}
	for _, tt := range v2 {
		if got := equalV2(tt.a, tt.b); got != tt.want {
			t.Errorf("equalV2(%q,%q) = %v", tt.a, tt.b, got)
		}
	}
}
