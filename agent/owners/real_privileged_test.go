//go:build privileged

package owners_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/go-logr/logr"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/cpumanager"
	lcpuset "latencytier.io/latencytier/agent/cpuset"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/internal/nritest"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/nri"
	"latencytier.io/latencytier/agent/owners"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/privtest"
)

// world is a real v1 cpuset tree on a real-kernel root: pod A (another
// writer's, not granted), pod B (granted the isolated CPU 1), a slice on
// CPU 0 the profile widens to the reserved CPUs 0-1, and a control slice
// on 0-1 the profile confines to CPU 0.
type world struct {
	root           *host.Root
	a, b           cgtest.Pod
	wide, narrow   string // the two slices' cpuset.cpus
	kubepods       []podcgroup.Option
	pods           []podcgroup.Pod
	none           *cpumanager.State
	onCPU1, onCPU0 []knob.Knob
}

func newWorld(t *testing.T) *world {
	t.Helper()
	root := testroot.RealKernel(t)
	base := cgtest.V1Controller(t, "cpuset")
	all, err := cpulist.Parse(testroot.Read(t, filepath.Join(base, "cpuset.cpus")))
	if err != nil || !all.Contains(0) || !all.Contains(1) {
		privtest.Missing(t, "need CPUs 0 and 1 in %s (%v, %v)", base, all, err)
	}
	init := func(cpus string) func(string) {
		return func(dir string) {
			cgtest.Set(t, filepath.Join(dir, "cpuset.cpus"), cpus)
			cgtest.Set(t, filepath.Join(dir, "cpuset.mems"), "0")
		}
	}
	w := &world{root: root}
	w.a = cgtest.V1Pod(t, "cpuset", podcgroup.DriverCgroupfs, "lttest-", init("0-1"))
	w.b = w.a.Sibling(t)
	w.kubepods = []podcgroup.Option{podcgroup.WithKubepods(w.a.Kubepods)}
	w.pods = []podcgroup.Pod{{UID: w.a.UID, Namespace: "team", Name: "a"}, {UID: w.b.UID, Namespace: "trading", Name: "b", Isolated: true}}
	wide, narrow := "lttest-"+cgtest.RandHex(t, 4)+".slice", "lttest-"+cgtest.RandHex(t, 4)+".slice"
	for s, cpus := range map[string]string{wide: "0", narrow: "0-1"} {
		cgtest.Mkdir(t, filepath.Join(base, s))
		init(cpus)(filepath.Join(base, s))
	}
	w.none, err = cpumanager.Parse([]byte(`{"policyName":"none","defaultCpuSet":"","checksum":1}`))
	if err != nil {
		t.Fatal(err)
	}
	k1, _, err := lcpuset.Knobs(root, cpuset.New(0, 1), lcpuset.WithSlices(wide))
	if err != nil {
		t.Fatal(err)
	}
	pod, res, err := lcpuset.PodKnobs(root, w.pods, cpuset.New(1), w.none, w.kubepods...)
	if err != nil || len(res) != 0 || len(pod) != 2 {
		t.Fatalf("pod B's knobs: %+v %+v %v", pod, res, err)
	}
	w.onCPU1 = append(k1, pod...)
	w.onCPU0, _, err = lcpuset.Knobs(root, cpuset.New(0), lcpuset.WithSlices(narrow))
	if err != nil {
		t.Fatal(err)
	}
	w.wide, w.narrow = filepath.Join(root.Cgroup("cpuset"), wide, "cpuset.cpus"), filepath.Join(root.Cgroup("cpuset"), narrow, "cpuset.cpus")
	return w
}

// applyOwned runs the engine on every knob with set's owner check and
// asserts: the knobs on CPU 1 are OwnedBy owner with zero writes (the
// kernel holds what it held, the journal holds nothing of them); the
// control on CPU 0 alone is written, then reverted.
func (w *world) applyOwned(t *testing.T, set owners.Set, owner string) {
	t.Helper()
	before := map[string]string{}
	for _, k := range w.onCPU1 {
		before[k.Path] = testroot.Read(t, k.Path)
		if k.Matches(before[k.Path], k.Desired) {
			t.Fatalf("%s already holds %s: a write would not be seen", k.ID, k.Desired)
		}
	}
	var writes []string
	e := &apply.Engine{Root: w.root, Log: logr.Discard(), Hook: func(s apply.Stage, id string) {
		if s == apply.StageWritten {
			writes = append(writes, id)
		}
	}}
	t.Cleanup(func() {
		if _, err := e.Revert(); err != nil {
			t.Errorf("revert: %v", err)
		}
	})
	rep, err := e.Apply(apply.Meta{Profile: "owners", Owner: set.OwnerOf}, append(append([]knob.Knob{}, w.onCPU1...), w.onCPU0...))
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) != 1 || writes[0] != w.onCPU0[0].ID || rep.Written != 1 {
		t.Fatalf("writes %v (report %d); want the CPU 0 control only", writes, rep.Written)
	}
	if got := testroot.Read(t, w.narrow); got != "0" {
		t.Fatalf("control slice holds %s; want 0", got)
	}
	j, err := journal.Load(w.root)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range w.onCPU1 {
		r := result(t, rep.Results, k.ID)
		if r.State != v1alpha1.SettingOwnedBy || r.Owner != owner {
			t.Errorf("%s = %+v; want OwnedBy %s", k.ID, r, owner)
		}
		if got := testroot.Read(t, k.Path); got != before[k.Path] {
			t.Errorf("%s: %s holds %s; it held %s", k.ID, k.Path, got, before[k.Path])
		}
		if j.Find(k.ID) != nil {
			t.Errorf("%s journaled", k.ID)
		}
	}
	t.Logf("owned: %d settings on CPU 1, e.g. %s", len(w.onCPU1), result(t, rep.Results, w.onCPU1[0].ID).Message)
}

func result(t *testing.T, rs []v1alpha1.SettingResult, id string) v1alpha1.SettingResult {
	t.Helper()
	for _, r := range rs {
		if r.Setting == id {
			return r
		}
	}
	t.Fatalf("no result for %s", id)
	return v1alpha1.SettingResult{}
}

// A real root process that identifies as the DRA CPU driver writes pod A's
// container cpuset to CPU 1: the agent's settings on CPU 1 (a slice widened
// onto it, pod B's cpusets) become OwnedBy the driver, with zero writes.
func TestRealDRADriverHoldingCPU1(t *testing.T) {
	w := newWorld(t)
	ctrCPUs := filepath.Join(w.a.CtrDir, "cpuset.cpus")
	testroot.Restore(t, ctrCPUs)
	pid := fakeDriver(t, ctrCPUs, "1")
	set := owners.Detect(w.root, owners.Input{Pods: w.pods, Isolated: cpuset.New(1), CPUManager: w.none, Cgroups: w.kubepods})
	if len(set.Holds) != 1 {
		t.Fatalf("holds %+v (errors %v); want pod A's container on CPU 1", set.Holds, set.Errs)
	}
	w.applyOwned(t, set, "dra-driver-cpu (pid "+itoa(pid)+")")
}

// An NRI plugin registered before the agent's in the runtime (the real
// adaptation) places a container on CPU 1: the agent's plugin leaves it
// and remembers it, and the settings on CPU 1 become OwnedBy that plugin,
// with zero writes.
func TestRealNRIPluginHoldingCPU1(t *testing.T) {
	w := newWorld(t)
	rt := nritest.Start(t)
	nritest.Placer(t, rt, "fakedra", "10", w.a.UID, "1")
	online, err := cpulist.Online(w.root)
	if err != nil {
		t.Fatal(err)
	}
	p := nri.New(rt.Socket, logr.Discard())
	sel := &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{"tier": "latency"}}
	p.Publish(&nri.Grants{Tuning: v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("1"), NamespaceSelector: sel}},
		Namespaces: map[string]map[string]string{"trading": {"tier": "latency"}}, Online: online.String()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); p.State().Reason != v1alpha1.ReasonHookConnected; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("plugin state %+v", p.State())
		}
	}
	a := rt.Create(t, &api.PodSandbox{Id: "sandbox-a", Uid: w.a.UID, Namespace: "team", Name: "a"},
		&api.Container{Id: "ctr-a", Name: "app", Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{}}}})
	if got := a.GetLinux().GetResources().GetCpu().GetCpus(); got != "1" {
		t.Fatalf("pod A's container placed on %q; want the other plugin's 1", got)
	}
	set := owners.Detect(w.root, owners.Input{Pods: w.pods, Isolated: cpuset.New(1), CPUManager: w.none, Cgroups: w.kubepods,
		Placements: p.Placements()})
	w.applyOwned(t, set, "an NRI plugin ordered before 90-latencytier")
}

// fakeDriver runs a real root process named dra-driver-cpu (a copy of the
// shell: the kernel names a process after the file it executes) that
// writes cpus to path and stays until the test ends. It returns its pid.
func fakeDriver(t *testing.T, path, cpus string) int {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dra-driver-cpu")
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", `echo "$2" > "$1" && echo written && read x`, "dra-driver-cpu", path, cpus)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make([]byte, len("written\n"))
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "written\n" {
		t.Fatalf("the fake driver did not write %s: %q %v", path, line, err)
	}
	comm := testroot.Read(t, filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "comm"))
	if strings.TrimSpace(comm) != "dra-driver-cpu" || testroot.Read(t, path) != cpus {
		t.Fatalf("fake driver comm %q, %s holds %s", comm, path, testroot.Read(t, path))
	}
	return cmd.Process.Pid
}

func itoa(n int) string { return strconv.Itoa(n) }
