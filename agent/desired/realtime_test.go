package desired_test

import (
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A pod asks for real-time scheduling; only the profile grants it: the
// namespace (realtime.namespaceSelector), the policy, the priority, and
// never without isolated CPUs. Every other asking pod is a Refusal (status
// and an event), and no knob; a malformed annotation too is Refused (the
// pod's owner wrote it), never Invalid, which would make the node
// PartiallyApplied.
func TestRealtimeIsGrantedOnlyByTheProfile(t *testing.T) {
	root := testroot.New(t, map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu\n"})
	rt := &v1alpha1.RealtimeSpec{NamespaceSelector: &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{tenantKey: "true"}},
		Policies: []v1alpha1.RealtimePolicy{v1alpha1.RealtimeFIFO}, MaxPriority: 40}
	granted := map[string]string{tenantKey: "true"}
	isolated := &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("1")}
	pod := func(name, ask string, ns map[string]string) podcgroup.Pod {
		return podcgroup.Pod{UID: name + "-uid", Namespace: "ns", Name: name, NamespaceLabels: ns,
			Annotations: map[string]string{v1alpha1.SchedPolicyAnnotation: ask}}
	}
	pods := []podcgroup.Pod{
		pod("ok", "fifo:40", granted),
		pod("other-ns", "fifo:10", nil),
		pod("too-high", "fifo:41", granted),
		pod("rr", "rr:10", granted),
		pod("garbage", "fifo:ten", granted),
		{UID: "quiet-uid", Namespace: "ns", Name: "quiet", NamespaceLabels: granted},
	}
	cases := []struct {
		name    string
		t       v1alpha1.TuningSpec
		refused map[string]string // pod name → refusing field
		granted bool              // "ok" reaches rtsched.Knobs
	}{
		{"grant", v1alpha1.TuningSpec{Realtime: rt, CPUs: isolated}, map[string]string{"other-ns": "realtime.namespaceSelector",
			"too-high": rtsched.FieldMaxPriority, "rr": rtsched.FieldPolicies, "garbage": v1alpha1.SchedPolicyAnnotation}, true},
		{"no-realtime", v1alpha1.TuningSpec{}, map[string]string{"ok": "realtime.namespaceSelector", "other-ns": "realtime.namespaceSelector",
			"too-high": "realtime.namespaceSelector", "rr": "realtime.namespaceSelector", "garbage": "realtime.namespaceSelector"}, false},
		{"unlimited-no-isolated", v1alpha1.TuningSpec{Realtime: rt, Scheduler: &v1alpha1.SchedulerSpec{RTRuntime: ptr.To("Unlimited")}},
			map[string]string{"ok": rtsched.FieldIsolated, "other-ns": "realtime.namespaceSelector",
				"too-high": rtsched.FieldIsolated, "rr": rtsched.FieldIsolated, "garbage": v1alpha1.SchedPolicyAnnotation}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := desired.Render(root, sysctl.Layout{}, tc.t, pods, nil)
			got := map[string]string{}
			for _, r := range s.Refusals {
				got[r.Pod.Name] = r.Field
				if !strings.Contains(r.Result.Message, r.Pod.Name) || r.Result.Setting != rtsched.PodID(r.Pod) {
					t.Errorf("refusal of %s: %+v", r.Pod.Name, r.Result)
				}
				if r.Result.State != v1alpha1.SettingRefused {
					t.Errorf("refusal of %s has state %s, want Refused", r.Pod.Name, r.Result.State)
				}
			}
			if len(got) != len(tc.refused) {
				t.Errorf("refused %v, want %v", got, tc.refused)
			}
			for name, field := range tc.refused {
				if got[name] != field {
					t.Errorf("pod %s refused by %q, want %q", name, got[name], field)
				}
			}
			for _, k := range s.Knobs {
				if strings.HasPrefix(k.ID, "rtsched/") {
					t.Errorf("knob for a temp-dir root's threads: %s", k.ID)
				}
			}
			// The granted pod reaches rtsched.Knobs, which refuses a host
			// root whose /proc is not the agent's pid namespace (here: a
			// temp dir) and marks rtsched undetermined.
			reached := false
			for _, r := range s.Results {
				reached = reached || (r.Setting == "rtsched" && strings.Contains(r.Message, "pid namespace"))
			}
			if reached != tc.granted {
				t.Errorf("granted pod reached rtsched.Knobs: %v, want %v; results %+v", reached, tc.granted, s.Results)
			}
		})
	}
}

// A granted pod whose thread may run on a shared CPU, or whose container's
// cgroup cpuset reaches one (where a thread may widen its affinity at any
// time), reaches rtsched and comes back a Refusal by cpus.isolated (an event
// on the pod), Refused in the results and no knob: nothing that makes the
// node PartiallyApplied.
func TestRealtimePodOnSharedCPUIsARefusal(t *testing.T) {
	for _, c := range []struct{ name, cgroup, allowed string }{
		{"thread-affinity", "1", "0-1"},
		{"cgroup-cpuset", "0-1", "1"},
	} {
		t.Run(c.name, func(t *testing.T) { realtimeOnSharedCPU(t, c.cgroup, c.allowed) })
	}
}

func realtimeOnSharedCPU(t *testing.T, cgroupCPUs, allowed string) {
	task := func(tid int, allowed string) map[string]string {
		f := make([]string, 50)
		for i := range f {
			f[i] = "0"
		}
		f[0], f[19] = "S", "4242"
		dir := fmt.Sprintf("proc/%d/task/%d/", 100, tid)
		return map[string]string{dir + "stat": fmt.Sprintf("%d (spin) %s\n", tid, strings.Join(f, " ")),
			dir + "status": "Name:\tspin\nCpus_allowed_list:\t" + allowed + "\n"}
	}
	ctr := strings.Repeat("c", 64)
	files := map[string]string{
		"proc/self/status":                                               fmt.Sprintf("Name:\tagent\nNSpid:\t%d\n", os.Getpid()),
		"sys/fs/cgroup/cgroup.controllers":                               "cpuset cpu\n",
		"sys/fs/cgroup/kubepods/podu1/" + ctr + "/cgroup.procs":          "100\n",
		"sys/fs/cgroup/kubepods/podu1/" + ctr + "/cpuset.cpus.effective": cgroupCPUs + "\n",
	}
	maps.Copy(files, task(100, "1"))
	maps.Copy(files, task(101, allowed))
	root := testroot.New(t, files)
	spec := v1alpha1.TuningSpec{Realtime: &v1alpha1.RealtimeSpec{NamespaceSelector: &v1alpha1.NamespaceSelector{}},
		CPUs: &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("1"), NamespaceSelector: &v1alpha1.NamespaceSelector{}}}
	pod := podcgroup.Pod{UID: "u1", Namespace: "tenant", Name: "spin", ContainerIDs: []string{"containerd://" + ctr},
		Annotations: map[string]string{v1alpha1.SchedPolicyAnnotation: "fifo:40"}}
	s := desired.Render(root, sysctl.Layout{}, spec, []podcgroup.Pod{pod}, nil)
	if len(s.Refusals) != 1 || s.Refusals[0].Field != rtsched.CauseCPUs || s.Refusals[0].Result.State != v1alpha1.SettingRefused {
		t.Fatalf("refusals %+v, want one by %s", s.Refusals, rtsched.CauseCPUs)
	}
	for _, r := range s.Results {
		if r.State == v1alpha1.SettingFailed || r.State == v1alpha1.SettingInvalid {
			t.Errorf("node-level result for the pod's own CPUs: %+v", r)
		}
	}
	for _, k := range s.Knobs {
		if strings.HasPrefix(k.ID, "rtsched/") {
			t.Errorf("knob for a refused pod: %s", k.ID)
		}
	}
}
