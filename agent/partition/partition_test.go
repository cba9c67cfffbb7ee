package partition_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/partition"
	"latencytier.io/latencytier/api/v1alpha1"
)

const (
	kp       = "kubepods.slice"
	bu       = kp + "/kubepods-burstable.slice"
	buPod    = bu + "/kubepods-burstable-pod7e57ab1e_0000_4b1e_8f00_0123456789ab.slice"
	buCtr    = buPod + "/cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope"
	guPod    = kp + "/kubepods-pod1b4f0c5e_9d7a_4b1e_8f00_0123456789ab.slice"
	guCtr    = guPod + "/cri-containerd-fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210.scope"
	guCtrNew = guPod + "/cri-containerd-aaaaaaaaaaaa0000000000000000000000000000000000000000000000000000.scope"
)

// cgroups is a cgroup v2 tree shaped like kubelet's with the systemd
// driver on a 6.8+ kernel: every cgroup has the cpuset files as the
// kernel shows them before anything is partitioned.
func cgroups(t *testing.T, dirs ...string) *host.Root {
	t.Helper()
	files := map[string]string{
		"sys/fs/cgroup/cgroup.controllers":    "cpuset cpu io memory pids\n",
		"sys/fs/cgroup/cpuset.cpus.effective": "0-7\n",
		"sys/fs/cgroup/cpuset.cpus.isolated":  "\n",
	}
	for _, d := range append([]string{kp, "system.slice"}, dirs...) {
		files["sys/fs/cgroup/"+d+"/cpuset.cpus"] = "\n"
		files["sys/fs/cgroup/"+d+"/cpuset.cpus.exclusive"] = "\n"
		files["sys/fs/cgroup/"+d+"/cpuset.cpus.partition"] = "member\n"
	}
	return testroot.New(t, files)
}

func cg(root *host.Root, rel, file string) string { return root.Cgroup(rel, file) }

func engine(root *host.Root, hook func(apply.Stage, string)) *apply.Engine {
	return &apply.Engine{Root: root, Log: logr.Discard(), Hook: hook}
}

var isolated = cpuset.New(2, 3, 4, 5, 6, 7)

func mustKnobs(t *testing.T, root *host.Root, reqs ...partition.Request) []knob.Knob {
	t.Helper()
	node := partition.Probe(root, kp)
	if !node.Supported {
		t.Fatalf("Probe: %+v, want supported", node)
	}
	knobs, results := partition.Knobs(root, node, reqs, partition.Options{Within: isolated})
	if len(results) != 0 {
		t.Fatalf("Knobs results %+v, want none", results)
	}
	return knobs
}

// snapshot reads every cpuset file under the tree's cgroup root.
func snapshot(t *testing.T, root *host.Root) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(root.Cgroup(), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			out[p] = testroot.Read(t, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A Burstable and a Guaranteed container each get their CPUs as a
// partition: exclusive CPUs written top-down (kubepods, the QoS slice, the
// pods, the containers, every ancestor holding the union below it), then
// the partition types; revert sets the types back to member first and
// removes the exclusive CPUs bottom-up, leaving every file as it was.
func TestApplyTopDownRevertBottomUp(t *testing.T) {
	root := cgroups(t, bu, buPod, buCtr, guPod, guCtr)
	before := snapshot(t, root)
	knobs := mustKnobs(t, root,
		partition.Request{Cgroup: buCtr, CPUs: "2-3", Type: "isolated"},
		partition.Request{Cgroup: guCtr, CPUs: "4,5", Type: "root"})
	var writes, restores []string
	e := engine(root, func(s apply.Stage, id string) {
		switch s {
		case apply.StageWritten:
			writes = append(writes, id)
		case apply.StageRestored:
			restores = append(restores, id)
		}
	})
	rep, err := e.Apply(apply.Meta{Profile: "p"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.State != v1alpha1.SettingApplied {
			t.Errorf("%s: %s %s", r.Setting, r.State, r.Message)
		}
	}
	want := []string{
		"partition/exclusive/" + kp,
		"partition/exclusive/" + bu,
		"partition/exclusive/" + guPod,
		"partition/exclusive/" + buPod,
		"partition/exclusive/" + guPod + "/fedcba987654",
		"partition/exclusive/" + buPod + "/0123456789ab",
		"partition/kubepods-burstable-pod7e57ab1e_0000_4b1e_8f00_0123456789ab.slice/0123456789ab",
		"partition/kubepods-pod1b4f0c5e_9d7a_4b1e_8f00_0123456789ab.slice/fedcba987654",
	}
	if !slices.Equal(writes, want) {
		t.Fatalf("write order\n%s\nwant\n%s", strings.Join(writes, "\n"), strings.Join(want, "\n"))
	}
	for path, v := range map[string]string{
		cg(root, kp, partition.ExclusiveFile):             "2-5",
		cg(root, bu, partition.ExclusiveFile):             "2-3",
		cg(root, buPod, partition.ExclusiveFile):          "2-3",
		cg(root, buCtr, partition.ExclusiveFile):          "2-3",
		cg(root, guPod, partition.ExclusiveFile):          "4-5",
		cg(root, guCtr, partition.ExclusiveFile):          "4-5",
		cg(root, buCtr, partition.PartitionFile):          "isolated",
		cg(root, guCtr, partition.PartitionFile):          "root",
		cg(root, "system.slice", partition.ExclusiveFile): "",
	} {
		if got := testroot.Read(t, path); got != v {
			t.Errorf("%s = %q after apply, want %q", path, got, v)
		}
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	rev := slices.Clone(want)
	slices.Reverse(rev)
	if !slices.Equal(restores, rev) {
		t.Errorf("restore order\n%s\nwant the reverse of the writes", strings.Join(restores, "\n"))
	}
	for p, v := range snapshot(t, root) {
		if before[p] != v {
			t.Errorf("%s = %q after revert, want the original %q", p, v, before[p])
		}
	}
}

// Every original is in the journal on disk before the first kernel write.
func TestOriginalsJournaledBeforeAnyWrite(t *testing.T) {
	root := cgroups(t, bu, buPod, buCtr)
	root.WriteString(cg(root, bu, partition.ExclusiveFile), "6") // someone else's value
	before := snapshot(t, root)
	knobs := mustKnobs(t, root, partition.Request{Cgroup: buCtr, CPUs: "2-3", Type: "isolated"})
	checked := false
	e := engine(root, func(s apply.Stage, _ string) {
		if s != apply.StageJournaled {
			return
		}
		checked = true
		j, err := journal.Load(root)
		if err != nil || j == nil {
			t.Fatalf("journal at %s: %v %v", s, j, err)
		}
		for _, k := range knobs {
			en := j.Find(k.ID)
			if en == nil {
				t.Errorf("%s not journaled before the writes", k.ID)
				continue
			}
			if !apply.Equal(en.Read(), before[k.Path]) {
				t.Errorf("%s journaled original %q, the file held %q", k.ID, en.Read(), before[k.Path])
			}
		}
		for p, v := range snapshot(t, root) {
			if !strings.HasPrefix(p, root.Cgroup()) || before[p] == v {
				continue
			}
			t.Errorf("%s written before the journal was complete", p)
		}
	})
	if _, err := e.Apply(apply.Meta{Profile: "p"}, knobs); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("the engine never reached the journaled stage")
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if got := testroot.Read(t, cg(root, bu, partition.ExclusiveFile)); got != "6" {
		t.Errorf("QoS slice exclusive after revert = %q, want the original 6", got)
	}
}

// A partition the kernel invalidated after the agent made it (a sibling
// took the CPUs, a hotplug) is seen as drift and re-asserted on the next
// pass; and when revert finds it still invalid it is still the agent's
// partition: it goes back to member instead of being left as someone
// else's value.
func TestInvalidatedPartitionDriftAndRevert(t *testing.T) {
	root := cgroups(t, bu, buPod, buCtr)
	req := partition.Request{Cgroup: buCtr, CPUs: "2-3", Type: "isolated"}
	knobs := mustKnobs(t, root, req)
	e := engine(root, nil)
	if _, err := e.Apply(apply.Meta{Profile: "p"}, knobs); err != nil {
		t.Fatal(err)
	}
	file := cg(root, buCtr, partition.PartitionFile)
	invalid := "isolated invalid (Cpu list in cpuset.cpus not exclusive)"
	testroot.Write(t, file, invalid+"\n")
	rep, err := e.Apply(apply.Meta{Profile: "p"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drifts) != 1 || rep.Drifts[0].ID != req.ID() || rep.Drifts[0].Theirs != invalid {
		t.Errorf("drifts %+v, want the invalidated partition %s", rep.Drifts, req.ID())
	}
	testroot.Write(t, file, invalid+"\n")
	r, err := e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	if got := testroot.Read(t, file); got != "member" {
		t.Errorf("partition after revert = %q, want member (results %+v)", got, r.Results)
	}
}

// A result whose read-back is an invalid partition says Invalid with the
// kernel's reason, whatever the engine called it.
func TestExplainNamesTheKernelsReason(t *testing.T) {
	id := partition.Request{Cgroup: buCtr}.ID()
	in := []v1alpha1.SettingResult{
		{Setting: id, Desired: "isolated", Actual: "isolated invalid (Parent is not a partition root)", State: v1alpha1.SettingFailed, Message: "holds ..."},
		{Setting: "partition/exclusive/" + kp, Desired: "2", Actual: "", State: v1alpha1.SettingFailed, Message: "x"},
		{Setting: "cpuset/system.slice", Desired: "0", Actual: "root invalid (x)", State: v1alpha1.SettingFailed, Message: "y"},
	}
	out := partition.Explain(slices.Clone(in))
	if out[0].State != v1alpha1.SettingInvalid || !strings.Contains(out[0].Message, "Parent is not a partition root") {
		t.Errorf("partition result %+v, want Invalid naming the reason", out[0])
	}
	if out[1] != in[1] || out[2] != in[2] {
		t.Errorf("Explain changed results that are not partition types: %+v", out[1:])
	}
}

func TestParseState(t *testing.T) {
	tests := []struct {
		in   string
		want partition.State
		err  bool
	}{
		{"member\n", partition.State{Type: partition.Member}, false},
		{"root", partition.State{Type: partition.Root}, false},
		{"isolated", partition.State{Type: partition.Isolated}, false},
		{"root invalid (Parent is not a partition root)", partition.State{Type: partition.Root, Invalid: true, Reason: "Parent is not a partition root"}, false},
		{"isolated invalid (cpuset.cpus and cpuset.cpus.exclusive are empty)", partition.State{Type: partition.Isolated, Invalid: true, Reason: "cpuset.cpus and cpuset.cpus.exclusive are empty"}, false},
		{"isolated invalid", partition.State{Type: partition.Isolated, Invalid: true}, false},
		{"member invalid (x)", partition.State{}, true},
		{"isolated invalid x", partition.State{}, true},
		{"isolated valid", partition.State{}, true},
		{"bogus", partition.State{}, true},
		{"", partition.State{}, true},
	}
	for _, tt := range tests {
		got, err := partition.ParseState(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseState(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	if err := (partition.State{Type: partition.Isolated, Invalid: true, Reason: "r"}).Err(); err == nil || !strings.Contains(err.Error(), "r") {
		t.Errorf("Err = %v, want one naming the reason", err)
	}
}

// Kernels without the interfaces: cgroup v1, and cgroup v2 before 6.7
// (no cpuset.cpus.exclusive, Debian's 6.1). Probe says Unsupported with
// the reason, Knobs gives every request an Unsupported result and no knob,
// and an apply writes nothing (no journal either).
func TestUnsupportedWritesNothing(t *testing.T) {
	v1 := testroot.New(t, map[string]string{
		"sys/fs/cgroup/cpuset/cpuset.cpus":                "0-7\n",
		"sys/fs/cgroup/cpuset/kubepods.slice/cpuset.cpus": "0-7\n",
	})
	v61 := testroot.New(t, map[string]string{
		"sys/fs/cgroup/cgroup.controllers":                   "cpuset cpu\n",
		"sys/fs/cgroup/kubepods.slice/cpuset.cpus":           "\n",
		"sys/fs/cgroup/kubepods.slice/cpuset.cpus.partition": "member\n",
		"sys/fs/cgroup/" + bu + "/cpuset.cpus":               "\n",
		"sys/fs/cgroup/" + buPod + "/cpuset.cpus":            "\n",
		"sys/fs/cgroup/" + buCtr + "/cpuset.cpus":            "2-3\n",
		"sys/fs/cgroup/" + buCtr + "/cpuset.cpus.partition":  "member\n",
	})
	noCpuset := testroot.New(t, map[string]string{
		"sys/fs/cgroup/cgroup.controllers":          "cpu io memory\n",
		"sys/fs/cgroup/kubepods.slice/cgroup.procs": "\n",
	})
	for name, tc := range map[string]struct {
		root   *host.Root
		reason string
	}{
		"cgroup v1":        {v1, "cgroup v1"},
		"6.1":              {v61, "6.7"},
		"no cpuset in v2":  {noCpuset, "cpuset controller is not available"},
		"no kubepods tree": {cgroupsWithout(t), "no kubepods.slice"},
	} {
		t.Run(name, func(t *testing.T) {
			node := partition.Probe(tc.root, kp)
			if node.Supported || !strings.Contains(node.Reason, tc.reason) {
				t.Fatalf("Probe = %+v, want Unsupported naming %q", node, tc.reason)
			}
			before := snapshot(t, tc.root)
			knobs, results := partition.Knobs(tc.root, node, []partition.Request{{Cgroup: buCtr, CPUs: "2-3", Type: "isolated"}}, partition.Options{Within: isolated})
			if len(knobs) != 0 || len(results) != 1 || results[0].State != v1alpha1.SettingUnsupported || results[0].Message != node.Reason {
				t.Fatalf("Knobs = %+v %+v, want no knobs and one Unsupported result with the reason", knobs, results)
			}
			rep, err := engine(tc.root, nil).Apply(apply.Meta{Profile: "p"}, knobs)
			if err != nil || rep.Written != 0 {
				t.Fatalf("Apply: %+v %v, want no writes", rep, err)
			}
			for p, v := range snapshot(t, tc.root) {
				if before[p] != v {
					t.Errorf("%s changed to %q", p, v)
				}
			}
			if _, err := os.Stat(journal.Path(tc.root)); err == nil {
				t.Errorf("a journal was written on an unsupported node")
			}
		})
	}
}

func cgroupsWithout(t *testing.T) *host.Root {
	return testroot.New(t, map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset\n", "sys/fs/cgroup/system.slice/cpuset.cpus": "\n"})
}

// Paths and CPU lists come from kubelet and pod state: each bad one is
// refused with an error naming the field, and gets no knob.
func TestUntrustedRequestsAreRefused(t *testing.T) {
	root := cgroups(t, bu, buPod, buCtr, guPod, guCtr)
	if err := os.Symlink(root.Cgroup(buCtr), root.Cgroup(guPod, "cri-containerd-link.scope")); err != nil {
		t.Fatal(err)
	}
	node := partition.Probe(root, kp)
	good := partition.Request{Cgroup: guCtr, CPUs: "4-5", Type: "isolated"}
	for _, tc := range []struct {
		name string
		req  partition.Request
		want string
	}{
		{"dot-dot", partition.Request{Cgroup: kp + "/../system.slice/x/y", CPUs: "2", Type: "isolated"}, `".."`},
		{"absolute", partition.Request{Cgroup: "/" + buCtr, CPUs: "2", Type: "isolated"}, "absolute"},
		{"outside kubepods", partition.Request{Cgroup: "system.slice/a/b", CPUs: "2", Type: "isolated"}, "not a container cgroup"},
		{"too shallow", partition.Request{Cgroup: buPod[:strings.LastIndex(buPod, "/")], CPUs: "2", Type: "isolated"}, "not a container cgroup"},
		{"empty element", partition.Request{Cgroup: kp + "//x/y", CPUs: "2", Type: "isolated"}, "empty"},
		{"odd characters", partition.Request{Cgroup: kp + "/a b/c/d", CPUs: "2", Type: "isolated"}, "characters"},
		{"missing", partition.Request{Cgroup: guPod + "/cri-containerd-gone.scope", CPUs: "2", Type: "isolated"}, "does not exist"},
		{"symlink", partition.Request{Cgroup: guPod + "/cri-containerd-link.scope", CPUs: "2", Type: "isolated"}, "not a directory"},
		{"bad cpulist", partition.Request{Cgroup: buCtr, CPUs: "2-x", Type: "isolated"}, "cpus \"2-x\""},
		{"huge cpulist", partition.Request{Cgroup: buCtr, CPUs: "0-5000000", Type: "isolated"}, "cpus"},
		{"empty cpulist", partition.Request{Cgroup: buCtr, CPUs: "", Type: "isolated"}, "cpus of"},
		{"outside isolated", partition.Request{Cgroup: buCtr, CPUs: "0-2", Type: "isolated"}, "outside the isolated CPUs"},
		{"taken", partition.Request{Cgroup: buCtr, CPUs: "5-6", Type: "isolated"}, "already belong"},
		{"bad type", partition.Request{Cgroup: buCtr, CPUs: "2", Type: "member"}, "type of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			knobs, results := partition.Knobs(root, node, []partition.Request{good, tc.req}, partition.Options{Within: isolated})
			if len(results) != 1 || results[0].State != v1alpha1.SettingInvalid || !strings.Contains(results[0].Message, tc.want) {
				t.Fatalf("results %+v, want one Invalid naming %q", results, tc.want)
			}
			for _, k := range knobs {
				if !strings.HasPrefix(k.Path, root.Cgroup(kp)+"/") || strings.Contains(k.Path, buCtr) || strings.Contains(k.Path, "link") {
					t.Errorf("knob %s at %s for a refused request", k.ID, k.Path)
				}
			}
			if len(knobs) != 4 { // kubepods, pod, container exclusive + type of the good one
				t.Errorf("%d knobs, want the good request's 4", len(knobs))
			}
		})
	}
}

// A container restart (a new container ID in the same pod) gets its
// partition again: the old container's entries are restored (its cgroup is
// gone) and the new one is written; a deleted pod's CPUs go to the next
// pod.
func TestContainerRestartAndPodReplacement(t *testing.T) {
	root := cgroups(t, guPod, guCtr)
	e := engine(root, nil)
	if _, err := e.Apply(apply.Meta{Profile: "p"}, mustKnobs(t, root, partition.Request{Cgroup: guCtr, CPUs: "2-3", Type: "isolated"})); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(root.Cgroup(guCtr)); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cpuset.cpus", partition.ExclusiveFile} {
		testroot.Write(t, root.Cgroup(guCtrNew, f), "\n")
	}
	testroot.Write(t, root.Cgroup(guCtrNew, partition.PartitionFile), "member\n")
	rep, err := e.Apply(apply.Meta{Profile: "p"}, mustKnobs(t, root, partition.Request{Cgroup: guCtrNew, CPUs: "2-3", Type: "isolated"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Restored) != 2 {
		t.Errorf("restored %+v, want the old container's type and exclusive CPUs", rep.Restored)
	}
	if got := testroot.Read(t, root.Cgroup(guCtrNew, partition.PartitionFile)); got != "isolated" {
		t.Errorf("new container partition = %q, want isolated", got)
	}
	// The pod is deleted and another takes its CPUs.
	if err := os.RemoveAll(root.Cgroup(guPod)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{bu, buPod, buCtr} {
		testroot.Write(t, root.Cgroup(d, partition.ExclusiveFile), "\n")
		testroot.Write(t, root.Cgroup(d, partition.PartitionFile), "member\n")
	}
	if _, err := e.Apply(apply.Meta{Profile: "p"}, mustKnobs(t, root, partition.Request{Cgroup: buCtr, CPUs: "2-3", Type: "isolated"})); err != nil {
		t.Fatal(err)
	}
	if got := testroot.Read(t, root.Cgroup(buCtr, partition.ExclusiveFile)); got != "2-3" {
		t.Errorf("the next pod's exclusive CPUs = %q, want 2-3", got)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if got := testroot.Read(t, root.Cgroup(kp, partition.ExclusiveFile)); got != "" {
		t.Errorf("kubepods exclusive after revert = %q, want empty", got)
	}
}
