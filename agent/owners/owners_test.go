package owners

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

const (
	uidA = "aaaaaaaa-0000-4000-8000-000000000001" // the pod another writer placed
	uidB = "bbbbbbbb-0000-4000-8000-000000000002" // a pod granted the isolated CPUs
	ctrA = "0123456789abcdef0123456789abcdef"
	ctrB = "fedcba9876543210fedcba9876543210"
)

// proc is a /proc/<pid> of a process run by uid with comm and argv[0].
func proc(files map[string]string, pid, uid, comm, argv0 string) {
	files["proc/"+pid+"/status"] = "Name:\t" + comm + "\nUid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid + "\n"
	files["proc/"+pid+"/comm"] = comm + "\n"
	files["proc/"+pid+"/cmdline"] = argv0 + "\x00--flag\x00"
}

// node is a fixture root: 4 online CPUs, a v1 cpuset hierarchy holding
// pod A (container on cpusA) and pod B (container on 0-3), and extra.
func node(t *testing.T, cpusA string, extra map[string]string) *host.Root {
	files := map[string]string{
		"sys/devices/system/cpu/online":    "0-3\n",
		"sys/fs/cgroup/cpuset/cpuset.cpus": "0-3\n",
		"sys/fs/cgroup/cpuset/kubepods/burstable/pod" + uidA + "/" + ctrA + "/cpuset.cpus": cpusA + "\n",
		"sys/fs/cgroup/cpuset/kubepods/burstable/pod" + uidB + "/" + ctrB + "/cpuset.cpus": "0-3\n",
		"proc/1/status": "Uid:\t0\t0\t0\t0\n", "proc/1/comm": "systemd\n", "proc/1/cmdline": "/sbin/init\x00",
	}
	for k, v := range extra {
		files[k] = v
	}
	return testroot.Files(t, files)
}

var pods = []podcgroup.Pod{
	{UID: uidA, Namespace: "team", Name: "a"},
	{UID: uidB, Namespace: "latency", Name: "b", Isolated: true},
}

// ours are the knobs a profile with reserved 0-1 and isolated 1-3 (or
// reserved 0 for the control) renders on the fixture node.
func ours(root *host.Root) []knob.Knob {
	b := root.Cgroup("cpuset", "kubepods", "burstable", "pod"+uidB)
	return []knob.Knob{
		{ID: "cpuset/system.slice", Desired: "0-1"},
		{ID: "cpuset/user.slice", Desired: "0"},
		{ID: "cpuset/cgroup.subtree_control", Desired: "+cpuset"},
		{ID: "irq/default_smp_affinity", Desired: "3"},
		{ID: "irq/24", Desired: "0-1"},
		{ID: "irq/25", Desired: "0"},
		{ID: "cpuset/pod/latency/b/" + uidB, Path: filepath.Join(b, "cpuset.cpus"), Desired: "1-3"},
		{ID: "cpuset/pod/latency/b/" + uidB + "/" + ctrB[:12], Path: filepath.Join(b, ctrB, "cpuset.cpus"), Desired: "1-3"},
		{ID: "scheduler/autogroup", Path: root.Proc("sys", "kernel", "sched_autogroup_enabled"), Desired: "0"},
		{ID: "power/cpu1/governor", Desired: "performance"},
		{ID: "cpuquota/latency/b/" + uidB + "/" + ctrB[:12], Desired: "-1"},
	}
}

// ownersOf runs Detect and returns, per knob ID of ours, the owner's name
// ("" for the agent's own).
func ownersOf(t *testing.T, root *host.Root, in Input) (map[string]string, Set) {
	t.Helper()
	s := Detect(root, in)
	out := map[string]string{}
	for _, k := range ours(root) {
		r, ok := s.OwnerOf(k)
		if !ok {
			out[k.ID] = ""
			continue
		}
		if r.State != v1alpha1.SettingOwnedBy || r.Setting != k.ID || r.Owner == "" || r.Message == "" {
			t.Errorf("%s: result %+v; want OwnedBy naming the owner, with a message", k.ID, r)
		}
		out[k.ID] = r.Owner
	}
	return out, s
}

func want(t *testing.T, got map[string]string, owner string, ids ...string) {
	t.Helper()
	for id, o := range got {
		expect := ""
		for _, w := range ids {
			if w == id {
				expect = owner
			}
		}
		if o != expect {
			t.Errorf("%s owned by %q; want %q", id, o, expect)
		}
	}
}

// onCPU1 are the knobs of ours that put work on CPU 1.
var onCPU1 = []string{"cpuset/system.slice", "irq/default_smp_affinity", "irq/24",
	"cpuset/pod/latency/b/" + uidB, "cpuset/pod/latency/b/" + uidB + "/" + ctrB[:12]}

// A root process that identifies as the DRA CPU driver, and a container it
// placed on CPU 1: every setting of ours on CPU 1 is the driver's, the
// rest (CPU 0 only, no CPUs at all) stay ours.
func TestDRADriverHoldingCPU1OwnsOurSettingsThere(t *testing.T) {
	files := map[string]string{}
	proc(files, "4242", "0", "dra-driver-cpu", "/usr/bin/dra-driver-cpu")
	root := node(t, "1", files)
	got, s := ownersOf(t, root, Input{Pods: pods, Isolated: cpuset.New(1, 2, 3)})
	want(t, got, "dra-driver-cpu (pid 4242)", onCPU1...)
	if len(s.Holds) != 1 || !s.Holds[0].CPUs.Equals(cpuset.New(1)) || s.Holds[0].Owner.Kind != DRACPUDriver {
		t.Fatalf("holds = %+v; want CPU 1 held by the DRA driver", s.Holds)
	}
	r, _ := s.OwnerOf(ours(root)[0])
	for _, w := range []string{"CPUs 1", "dra-driver-cpu (pid 4242)", "container " + ctrA[:12] + " of pod team/a", "DeviceClass"} {
		if !strings.Contains(r.Message, w) {
			t.Errorf("message %q lacks %q", r.Message, w)
		}
	}
}

// Who placed the container decides its name, never whether it is held: a
// process named like the driver but run by a tenant's uid names nothing,
// and the cpuset is still someone else's.
func TestPlacerNamedOnlyWhenRunByRoot(t *testing.T) {
	files := map[string]string{}
	proc(files, "4242", "1000", "dra-driver-cpu", "dra-driver-cpu")
	root := node(t, "1", files)
	got, _ := ownersOf(t, root, Input{Pods: pods, Isolated: cpuset.New(1, 2, 3)})
	want(t, got, "another writer of container cpusets (kubelet's CPU manager policy is none)", onCPU1...)

	files = map[string]string{}
	proc(files, "77", "0", "nri-resource-po", "/bin/nri-resource-policy-balloons")
	got, _ = ownersOf(t, node(t, "1", files), Input{Pods: pods, Isolated: cpuset.New(1, 2, 3)})
	want(t, got, "nri-resource-policy-balloons (pid 77)", onCPU1...)
}

// A container cpuset that is nobody else's claims nothing: every online
// CPU, empty (cgroup v2's inherit), the profile's isolated set in a pod
// granted it (the agent placed it), or a path the agent journaled.
func TestCpusetsThatAreNobodyElses(t *testing.T) {
	for name, c := range map[string]struct {
		cpus string
		ours bool
	}{"online": {cpus: "0-3"}, "empty": {cpus: ""}, "isolated": {cpus: "1-3"}, "journaled": {cpus: "1", ours: true}} {
		t.Run(name, func(t *testing.T) {
			root := node(t, c.cpus, nil)
			in := Input{Pods: []podcgroup.Pod{pods[1], {UID: uidA, Namespace: "team", Name: "a", Isolated: true}}, Isolated: cpuset.New(1, 2, 3)}
			if c.ours {
				path := root.Cgroup("cpuset", "kubepods", "burstable", "pod"+uidA, ctrA, "cpuset.cpus")
				in.Ours = func(p string) bool { return p == path }
			}
			got, s := ownersOf(t, root, in)
			want(t, got, "")
			if len(s.Holds) != 0 || len(s.Errs) != 0 {
				t.Fatalf("holds %+v errs %v; want none", s.Holds, s.Errs)
			}
		})
	}
}

// A container whose cpuset another writer chose stays where it is even
// when the profile's CPUs do not overlap it.
func TestPlacedContainerIsNotMovedOffItsCPUs(t *testing.T) {
	files := map[string]string{}
	proc(files, "9", "0", "dra-driver-cpu", "dra-driver-cpu")
	root := node(t, "0", files)
	s := Detect(root, Input{Pods: pods[:1], Isolated: cpuset.New(2, 3)})
	path := root.Cgroup("cpuset", "kubepods", "burstable", "pod"+uidA, ctrA, "cpuset.cpus")
	k := knob.Knob{ID: "cpuset/pod/team/a/" + uidA + "/" + ctrA[:12], Path: path, Desired: "2-3"}
	if r, ok := s.OwnerOf(k); !ok || r.Owner != "dra-driver-cpu (pid 9)" {
		t.Fatalf("the placed container's own knob: %+v %v; want owned by the driver", r, ok)
	}
}

// The isolated set is the agent's placement only in a pod granted it: in
// any other pod another writer chose it.
func TestIsolatedSetInAPodNotGranted(t *testing.T) {
	root := node(t, "1-3", nil)
	got, _ := ownersOf(t, root, Input{Pods: pods, Isolated: cpuset.New(1, 2, 3)})
	want(t, got, "another writer of container cpusets (kubelet's CPU manager policy is none)", onCPU1...)
}

// Placements the NRI plugin saw (a plugin ordered before it set the
// cpuset) hold CPUs and their container, named after the plugin when no
// placer process is found.
func TestNRIPlacementsHoldTheirCPUs(t *testing.T) {
	root := node(t, "0-3", nil)
	in := Input{Pods: pods, Isolated: cpuset.New(1, 2, 3), Placements: []Placement{
		{PodUID: uidA, Namespace: "team", Pod: "a", ContainerID: ctrA, Container: "app", CPUs: "1"},
		{PodUID: uidB, Namespace: "latency", Pod: "b", ContainerID: ctrB, Container: "app", CPUs: "0-3"}, // the shared pool: nobody's
	}}
	got, s := ownersOf(t, root, in)
	want(t, got, "an NRI plugin ordered before 90-latencytier", onCPU1...)
	if len(s.Holds) != 1 || !strings.Contains(s.Holds[0].Where, "container app of pod team/a") {
		t.Fatalf("holds = %+v", s.Holds)
	}
}

// kubelet's static CPU manager owns every pod's cpuset and holds its
// exclusive CPUs; the containers' cpusets are then kubelet's, not
// attributed to anyone else.
func TestKubeletStaticPolicy(t *testing.T) {
	files := map[string]string{}
	proc(files, "4242", "0", "dra-driver-cpu", "dra-driver-cpu")
	files["var/lib/kubelet/cpu_manager_state"] = `{"policyName":"static","defaultCpuSet":"0,2-3","entries":{"` + uidA + `":{"app":"1"}},"checksum":1}`
	root := node(t, "1", files)
	got, s := ownersOf(t, root, Input{Pods: pods, Isolated: cpuset.New(1, 2, 3)})
	want(t, got, "kubelet CPU manager (static)", onCPU1...)
	if len(s.Holds) != 1 || s.Holds[0].Owner.Kind != KubeletCPUManager {
		t.Fatalf("holds = %+v; want kubelet's exclusive CPU 1 only", s.Holds)
	}
}

func tunedFiles(active string) map[string]string {
	files := map[string]string{
		"etc/tuned/active_profile": active + "\n",
		"usr/lib/tuned/realtime/tuned.conf": "[main]\ninclude=network-latency\n\n[sysctl]\nkernel.sched_autogroup_enabled = 0\n" +
			"[scheduler]\nisolated_cores=${isolated_cores}\n",
		"usr/lib/tuned/network-latency/tuned.conf": "[main]\ninclude = realtime\n[cpu]\nforce_latency=cstate.id_no_zero:1|3\n# governor=performance\n",
	}
	proc(files, "600", "0", "tuned", "/usr/bin/python3")
	return files
}

// TuneD with an active profile owns what the profile (and what it
// includes, once) sets: sysctls, idle states, IRQs through its scheduler
// plugin; not what it does not set (the governor here).
func TestTuneDActiveProfile(t *testing.T) {
	root := node(t, "0-3", tunedFiles("realtime"))
	got, s := ownersOf(t, root, Input{Pods: pods, Isolated: cpuset.New(1, 2, 3)})
	o := "tuned (pid 600, profile realtime)"
	want(t, got, o, "scheduler/autogroup", "irq/default_smp_affinity", "irq/24", "irq/25")
	idle := knob.Knob{ID: "power/cpu1/idle-state2/disable", Desired: "1"}
	if r, ok := s.OwnerOf(idle); !ok || r.Owner != o || !strings.Contains(r.Message, "TuneD profile (realtime") {
		t.Fatalf("idle state: %+v %v", r, ok)
	}
	if len(s.Errs) != 0 {
		t.Fatalf("errs = %v", s.Errs)
	}
}

// TuneD's files are untrusted: a profile name that is not one is refused
// before a path is built, and an oversized file is refused naming it. No
// active profile, or no tuned running, claims nothing.
func TestTuneDUntrustedAndInactive(t *testing.T) {
	for name, c := range map[string]struct {
		files   map[string]string
		errPart string
	}{
		"path in the name": {tunedFiles("../../etc/passwd"), "is not a TuneD profile name"},
		"oversized":        {tunedFiles(strings.Repeat("x", maxProcFile+1)), "active_profile: longer than"},
		"no profile":       {tunedFiles(""), ""},
		"not running": {func() map[string]string {
			f := tunedFiles("realtime")
			delete(f, "proc/600/status")
			return f
		}(), ""},
	} {
		t.Run(name, func(t *testing.T) {
			root := node(t, "0-3", c.files)
			got, s := ownersOf(t, root, Input{Pods: pods})
			want(t, got, "")
			errs := ""
			for _, e := range s.Errs {
				errs += e.Error()
			}
			if (c.errPart == "") != (errs == "") || !strings.Contains(errs, c.errPart) {
				t.Fatalf("errs %q; want one containing %q", errs, c.errPart)
			}
		})
	}
}

// CRI-O's hooks own a pod's quota when the pod asks by annotation and the
// configuration allows it; IRQ affinity node-wide for irq-load-balancing.
// A commented-out allowance allows nothing.
func TestCRIOHooks(t *testing.T) {
	conf := "[crio.runtime.runtimes.high-performance]\nallowed_annotations = [\n  \"cpu-quota.crio.io\",\n  \"irq-load-balancing.crio.io\",\n]\n"
	annotated := []podcgroup.Pod{pods[0], {UID: uidB, Namespace: "latency", Name: "b", Isolated: true,
		Annotations: map[string]string{CRIOCPUQuota: "disable", CRIOIRQLoadBalancing: "disable"}}}
	files := map[string]string{"etc/crio/crio.conf.d/99-hp.conf": conf}
	proc(files, "50", "0", "crio", "/usr/bin/crio")
	root := node(t, "0-3", files)
	got, _ := ownersOf(t, root, Input{Pods: annotated})
	want(t, got, "CRI-O high-performance hooks (crio pid 50)", "cpuquota/latency/b/"+uidB+"/"+ctrB[:12],
		"irq/default_smp_affinity", "irq/24", "irq/25")

	files["etc/crio/crio.conf.d/99-hp.conf"] = "# " + strings.ReplaceAll(conf, "\n", "\n# ")
	got, _ = ownersOf(t, node(t, "0-3", files), Input{Pods: annotated})
	want(t, got, "")
}

// A container the agent's own plugin placed is the agent's even when the
// profile's isolated CPUs changed since: neither its placement nor its
// cgroup holds anything.
func TestAgentsOwnPlacementsHoldNothing(t *testing.T) {
	root := node(t, "1", nil)
	in := Input{Pods: pods, Isolated: cpuset.New(2, 3), Placements: []Placement{
		{PodUID: uidA, Namespace: "team", Pod: "a", ContainerID: ctrA, Container: "app", CPUs: "1", ByAgent: true}}}
	got, s := ownersOf(t, root, in)
	want(t, got, "")
	if len(s.Holds) != 0 {
		t.Fatalf("holds %+v; want none", s.Holds)
	}
}
