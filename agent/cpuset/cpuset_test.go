package cpuset

import (
	"os"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpumanager"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
)

type want struct{ id, rel, desired string }

func checkKnobs(t *testing.T, root *host.Root, got []knob.Knob, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("knobs = %+v; want %+v", got, wants)
	}
	for i, w := range wants {
		if got[i].ID != w.id || got[i].Path != root.Path(w.rel) || got[i].Desired != w.desired {
			t.Errorf("knob %d = %s %s %q; want %s %s %q", i, got[i].ID, got[i].Path, got[i].Desired, w.id, root.Path(w.rel), w.desired)
		}
	}
}

func TestKnobsV1Fixture(t *testing.T) {
	cg := "sys/fs/cgroup/cpuset/"
	root := testroot.Lines(t, map[string]string{
		"sys/fs/cgroup/unified/cgroup.controllers":  "",
		cg + "cpuset.cpus":                          "0-7",
		cg + "system.slice/cpuset.cpus":             "0-7",
		cg + "system.slice/a.service/cpuset.cpus":   "0-7",
		cg + "system.slice/b.service/cpuset.cpus":   "6-7",
		cg + "system.slice/b.service/x/cpuset.cpus": "1,7",
		cg + "init.scope/cpuset.cpus":               "0-7",
	})
	knobs, results, err := Knobs(root, cpuset.New(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	// Leaves first; b.service has no reserved CPU so it takes its parent's
	// set, and its child keeps its reserved CPU 1.
	checkKnobs(t, root, knobs, []want{
		{"cpuset/system.slice/a.service", cg + "system.slice/a.service/cpuset.cpus", "0-1"},
		{"cpuset/system.slice/b.service/x", cg + "system.slice/b.service/x/cpuset.cpus", "1"},
		{"cpuset/system.slice/b.service", cg + "system.slice/b.service/cpuset.cpus", "0-1"},
		{"cpuset/system.slice", cg + "system.slice/cpuset.cpus", "0-1"},
		{"cpuset/init.scope", cg + "init.scope/cpuset.cpus", "0-1"},
	})
	if len(results) != 1 || results[0].Setting != "cpuset/user.slice" || results[0].State != v1alpha1.SettingUnsupported {
		t.Fatalf("results = %+v; want user.slice reported missing", results)
	}
	if _, err := os.Stat(root.Cgroup("cpuset", "user.slice")); err == nil {
		t.Fatal("user.slice was created")
	}
	if knobs[0].Matches("0,1", "0-1") != true || knobs[0].Matches("0", "0-1") {
		t.Error("knob Equal is not a cpulist comparison")
	}
	if _, _, err := Knobs(root, cpuset.New()); err == nil {
		t.Error("empty reserved set accepted")
	}
}

func TestKnobsV2(t *testing.T) {
	t.Run("cpuset enabled", func(t *testing.T) {
		root := testroot.Lines(t, map[string]string{
			"sys/fs/cgroup/cgroup.controllers":                 "cpuset cpu io memory pids",
			"sys/fs/cgroup/cgroup.subtree_control":             "cpuset cpu memory",
			"sys/fs/cgroup/system.slice/cpuset.cpus":           "",
			"sys/fs/cgroup/system.slice/x.service/cpuset.cpus": "",
			"sys/fs/cgroup/user.slice/cpuset.cpus":             "",
			"sys/fs/cgroup/init.scope/cpuset.cpus":             "",
		})
		knobs, results, err := Knobs(root, cpuset.New(0))
		if err != nil || len(results) != 0 {
			t.Fatalf("Knobs: %v %v", results, err)
		}
		checkKnobs(t, root, knobs, []want{
			{"cpuset/system.slice", "sys/fs/cgroup/system.slice/cpuset.cpus", "0"},
			{"cpuset/user.slice", "sys/fs/cgroup/user.slice/cpuset.cpus", "0"},
			{"cpuset/init.scope", "sys/fs/cgroup/init.scope/cpuset.cpus", "0"},
		})
		if knobs[0].Matches("", "0") {
			t.Error(`"" (inherit) must not match a reserved set`)
		}
	})
	t.Run("controller to enable", func(t *testing.T) {
		root := testroot.Lines(t, map[string]string{
			"sys/fs/cgroup/cgroup.controllers":     "cpuset cpu io memory pids",
			"sys/fs/cgroup/cgroup.subtree_control": "cpu memory",
			"sys/fs/cgroup/system.slice/cpu.max":   "max 100000",
			"sys/fs/cgroup/init.scope/cpu.max":     "max 100000",
		})
		knobs, results, err := Knobs(root, cpuset.New(0))
		if err != nil {
			t.Fatal(err)
		}
		if len(knobs) != 1 || knobs[0].ID != subtreeID || knobs[0].Path != root.Cgroup("cgroup.subtree_control") || knobs[0].Desired != "+cpuset" {
			t.Fatalf("knobs = %+v; want only the subtree_control knob", knobs)
		}
		k := knobs[0]
		if orig := k.RestoreValue("cpu memory"); orig != "-cpuset" {
			t.Errorf("RestoreValue(cpu memory) = %q; want -cpuset", orig)
		}
		if k.Matches("cpu memory", "+cpuset") || !k.Matches("cpu cpuset memory", "+cpuset") || !k.Matches("cpu memory", "-cpuset") {
			t.Error("subtree knob does not compare by cpuset state")
		}
		states := map[string]v1alpha1.SettingState{}
		for _, r := range results {
			states[r.Setting] = r.State
			if r.State == v1alpha1.SettingFailed && !strings.Contains(r.Message, "next pass") {
				t.Errorf("result %+v does not say when it will be applied", r)
			}
		}
		if states["cpuset/system.slice"] != v1alpha1.SettingFailed || states["cpuset/init.scope"] != v1alpha1.SettingFailed ||
			states["cpuset/user.slice"] != v1alpha1.SettingUnsupported {
			t.Fatalf("results = %+v", results)
		}
	})
	t.Run("controller unavailable", func(t *testing.T) {
		root := testroot.Lines(t, map[string]string{
			"sys/fs/cgroup/cgroup.controllers":   "cpu io memory pids",
			"sys/fs/cgroup/system.slice/cpu.max": "max 100000",
		})
		knobs, results, err := Knobs(root, cpuset.New(0), WithSlices("system.slice"))
		if err != nil || len(knobs) != 0 || len(results) != 1 || results[0].State != v1alpha1.SettingUnsupported {
			t.Fatalf("got %+v %+v %v", knobs, results, err)
		}
	})
}

func TestSubtreeEqual(t *testing.T) {
	sub := []struct {
		a, b string
		want bool
	}{
		{"cpu cpuset", "+cpuset", true},
		{"cpu", "+cpuset", false},
		{"cpu", "-cpuset", true},
		{"-cpuset", "cpu io", true},
		{"+cpuset", "+cpuset", true},
		{"cpusetx", "+cpuset", false},
	}
	for _, tt := range sub {
		if got := subtreeEqual(tt.a, tt.b); got != tt.want {
			t.Errorf("subtreeEqual(%q,%q) = %v", tt.a, tt.b, got)
		}
	}
}

const (
	uid = "1b4f0c5e-9d7a-4b1e-8f00-0123456789ab"
	esc = "1b4f0c5e_9d7a_4b1e_8f00_0123456789ab"
	cid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func optedIn(uid string) podcgroup.Pod {
	return podcgroup.Pod{UID: uid, Namespace: "shop", Name: "checkout", Isolated: true}
}

func TestPodKnobsNonePolicy(t *testing.T) {
	podRel := "sys/fs/cgroup/cpuset/kubepods/burstable/pod" + uid
	root := testroot.Lines(t, map[string]string{
		"sys/fs/cgroup/cpuset/kubepods/burstable/cpuset.cpus": "0-3",
		podRel + "/cpuset.cpus":                               "0-3",
		podRel + "/" + cid + "/cpuset.cpus":                   "0-3",
	})
	none, _ := cpumanager.Read(host.New("../cpumanager/testdata/none"))
	pods := []podcgroup.Pod{optedIn(uid), {UID: "x", Namespace: "shop", Name: "batch"}}
	knobs, results, err := PodKnobs(root, pods, cpuset.New(2, 3), none)
	if err != nil || len(results) != 0 {
		t.Fatalf("PodKnobs: %v %v", results, err)
	}
	checkKnobs(t, root, knobs, []want{
		{"cpuset/pod/shop/checkout/" + uid + "/" + cid[:12], podRel + "/" + cid + "/cpuset.cpus", "2-3"},
		{"cpuset/pod/shop/checkout/" + uid, podRel + "/cpuset.cpus", "2-3"},
	})
	// No state file at all behaves like the none policy.
	k2, _, err := PodKnobs(root, pods[:1], cpuset.New(2, 3), nil)
	if err != nil || len(k2) != 2 {
		t.Fatalf("without state: %v %v", k2, err)
	}
	if k, r, err := PodKnobs(root, pods, cpuset.New(), none); k != nil || r != nil || err != nil {
		t.Errorf("empty isolated set: %v %v %v", k, r, err)
	}
}

func TestPodKnobsV2Systemd(t *testing.T) {
	podRel := "sys/fs/cgroup/kubepods.slice/kubepods-pod" + esc + ".slice"
	root := testroot.Lines(t, map[string]string{
		"sys/fs/cgroup/cgroup.controllers":                       "cpuset cpu",
		podRel + "/cpuset.cpus":                                  "",
		podRel + "/cri-containerd-" + cid + ".scope/cpuset.cpus": "",
	})
	knobs, results, err := PodKnobs(root, []podcgroup.Pod{optedIn(uid)}, cpuset.New(1), nil)
	if err != nil || len(results) != 0 {
		t.Fatalf("PodKnobs: %v %v", results, err)
	}
	checkKnobs(t, root, knobs, []want{
		{"cpuset/pod/shop/checkout/" + uid, podRel + "/cpuset.cpus", "1"},
		{"cpuset/pod/shop/checkout/" + uid + "/" + cid[:12], podRel + "/cri-containerd-" + cid + ".scope/cpuset.cpus", "1"},
	})
}

func TestPodKnobsStaticPolicy(t *testing.T) {
	root := testroot.Lines(t, map[string]string{"sys/fs/cgroup/cpuset/kubepods/pod" + uid + "/cpuset.cpus": "1-2"})
	static, err := cpumanager.Read(host.New("../cpumanager/testdata/static"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		uid      string
		isolated cpuset.CPUSet
		state    v1alpha1.SettingState
		actual   string
	}{
		{"exclusive within isolated", uid, cpuset.New(1, 2), v1alpha1.SettingApplied, "1-2"},
		{"exclusive outside isolated", uid, cpuset.New(6, 7), v1alpha1.SettingOwnedBy, "1-2"},
		{"shared pool", "no-entries", cpuset.New(1, 2), v1alpha1.SettingOwnedBy, "0,3-7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			knobs, results, err := PodKnobs(root, []podcgroup.Pod{optedIn(tt.uid)}, tt.isolated, static)
			if err != nil || len(knobs) != 0 || len(results) != 1 {
				t.Fatalf("got %v %v %v; want one result and no knobs", knobs, results, err)
			}
			r := results[0]
			owner := map[bool]string{true: KubeletOwner(static)}[tt.state == v1alpha1.SettingOwnedBy]
			if r.State != tt.state || r.Actual != tt.actual || r.Owner != owner || !strings.Contains(r.Message, "kubelet") {
				t.Fatalf("result = %+v", r)
			}
		})
	}
}

func TestPodKnobsMissing(t *testing.T) {
	t.Run("no pod cgroup", func(t *testing.T) {
		root := testroot.Lines(t, map[string]string{"sys/fs/cgroup/cpuset/kubepods/": "/"})
		knobs, results, err := PodKnobs(root, []podcgroup.Pod{optedIn(uid)}, cpuset.New(1), nil)
		if err != nil || len(knobs) != 0 || len(results) != 1 || results[0].State != v1alpha1.SettingFailed {
			t.Fatalf("got %v %+v %v", knobs, results, err)
		}
	})
	t.Run("v2 pod without cpuset controller", func(t *testing.T) {
		root := testroot.Lines(t, map[string]string{
			"sys/fs/cgroup/cgroup.controllers":              "cpu",
			"sys/fs/cgroup/kubepods/pod" + uid + "/cpu.max": "max 100000",
		})
		knobs, results, err := PodKnobs(root, []podcgroup.Pod{optedIn(uid)}, cpuset.New(1), nil)
		if err != nil || len(knobs) != 0 || len(results) != 1 || results[0].State != v1alpha1.SettingUnsupported {
			t.Fatalf("got %v %+v %v", knobs, results, err)
		}
	})
}
