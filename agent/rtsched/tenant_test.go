package rtsched

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// tenantCtr is the container cgroup of tenantRoot's pod; cgroupCpus the
// file of its cgroup cpuset ("1": within the grant's isolated CPU 1 unless
// a case says otherwise).
const (
	tenantCtr  = "sys/fs/cgroup/kubepods/podu1/cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc/"
	cgroupCpus = "cpuset.cpus.effective"
)

// tenantRoot is a temp-dir host whose /proc is the agent's own namespace
// (proc/self/status names the test's pid) with one pod of one container
// (cgroup v2, cgroupfs driver) whose cgroup.procs is procs; threads adds
// each thread's stat and status.
func tenantRoot(t *testing.T, procs string, threads func(files map[string]string)) (podcgroup.Pod, func() ([]string, []v1alpha1.SettingResult, []PodRefusal)) {
	t.Helper()
	files := map[string]string{tenantCtr + "cgroup.procs": procs}
	threads(files)
	p, knobs := tenantRootKnobs(t, files)
	return p, func() ([]string, []v1alpha1.SettingResult, []PodRefusal) {
		ks, res, no := knobs()
		var ids []string
		for _, k := range ks {
			ids = append(ids, k.ID)
		}
		return ids, res, no
	}
}

// tenantRootKnobs is tenantRoot's host with files added (cgroup.procs "100"
// unless files sets it), and the knobs of its pod granted fifo:40 on CPU 1.
func tenantRootKnobs(t *testing.T, files map[string]string) (podcgroup.Pod, func() ([]knob.Knob, []v1alpha1.SettingResult, []PodRefusal)) {
	t.Helper()
	all := map[string]string{
		"proc/self/status":                 fmt.Sprintf("Name:\tagent\nNSpid:\t%d\n", os.Getpid()),
		"sys/fs/cgroup/cgroup.controllers": "cpuset cpu\n",
		tenantCtr + "cgroup.procs":         "100\n",
		tenantCtr + cgroupCpus:             "1\n",
	}
	for k, v := range files {
		all[k] = v
	}
	root := testroot.New(t, all)
	p := podcgroup.Pod{UID: "u1", Namespace: "tenant", Name: "spin", ContainerIDs: []string{"containerd://" + strings.Repeat("c", 64)}}
	return p, func() ([]knob.Knob, []v1alpha1.SettingResult, []PodRefusal) {
		ks, res, no, err := Knobs(root, []Grant{{Pod: p, Value: "fifo:40", CPUs: cpuset.New(1)}})
		if err != nil {
			t.Fatal(err)
		}
		return ks, res, no
	}
}

// What a granted pod's owner controls (where its threads may run, how many
// threads and processes it has) gets the pod Refused, with its cause, and
// never a Failed result: a tenant cannot make the node PartiallyApplied.
func TestTenantControlledCausesArePodScopedRefusals(t *testing.T) {
	cases := []struct {
		name    string
		procs   string
		threads func(files map[string]string)
		knobs   int
		cause   string // "" when nothing is refused
	}{
		{"within-isolated", "100\n", func(f map[string]string) {
			task(f, 100, 100, "spin", 0, 0, 0, "1")
			task(f, 100, 101, "spin", 0, 0, 0, "1")
		}, 2, ""},
		{"a-thread-on-a-shared-cpu", "100\n", func(f map[string]string) {
			task(f, 100, 100, "spin", 0, 0, 0, "1")
			task(f, 100, 101, "helper", 0, 0, 0, "0-1")
		}, 0, CauseCPUs},
		{"more-threads-than-the-bound", "100\n", func(f map[string]string) {
			for tid := 100; tid < 100+maxThreads+10; tid++ {
				task(f, 100, tid, "spin", 0, 0, 0, "1")
			}
		}, maxThreads, CauseThreads},
		// The thread narrowed its own affinity onto the isolated CPU, but
		// its cgroup lets it widen back onto CPU 0 at any time.
		{"cgroup-cpuset-wider-than-isolated", "100\n", func(f map[string]string) {
			f[tenantCtr+cgroupCpus] = "0-1\n"
			task(f, 100, 100, "spin", 0, 0, 0, "1")
			task(f, 100, 101, "spin", 0, 0, 0, "1")
		}, 0, CauseCPUs},
		{"oversized-cgroup-procs", strings.Repeat("1234567\n", maxIDFile/8+1), func(f map[string]string) {
			task(f, 100, 100, "spin", 0, 0, 0, "1")
		}, 0, CauseProcs},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, knobs := tenantRoot(t, tc.procs, tc.threads)
			ids, res, no := knobs()
			if len(ids) != tc.knobs {
				t.Errorf("%d knobs, want %d", len(ids), tc.knobs)
			}
			for _, r := range res {
				if r.State == v1alpha1.SettingFailed || r.State == v1alpha1.SettingInvalid {
					t.Errorf("a pod-controlled cause became a node result: %+v", r)
				}
			}
			if tc.cause == "" {
				if len(no) != 0 {
					t.Errorf("refused: %+v", no)
				}
				return
			}
			if len(no) != 1 || no[0].Cause != tc.cause || no[0].Result.State != v1alpha1.SettingRefused ||
				!strings.HasPrefix(no[0].Result.Setting, "rtsched/tenant/spin/u1") || !strings.Contains(no[0].Result.Message, "tenant/spin") {
				t.Fatalf("refusals %+v, want one Refused by %s", no, tc.cause)
			}
		})
	}
}
