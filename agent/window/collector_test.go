package window

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-logr/logr/testr"
	"latencytier.io/latencytier/agent/findings"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
)

// An opted-in pod throttled and waiting for CPU in a cgroup v2 fixture is
// judged in the window: OptedInPodThrottled and PodCPUPressure.
func TestThrottlingFindingsCgroupV2Fixture(t *testing.T) {
	uid := "0b5e6f1c-0000-4000-8000-0123456789ab"
	pod := "sys/fs/cgroup/kubepods/pod" + uid
	root := testroot.Files(t, map[string]string{
		"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
		pod + "/cpu.max":                   "50000 100000\n",
		pod + "/cpu.stat":                  "usage_usec 1000\nnr_periods 100\nnr_throttled 10\nthrottled_usec 5000\n",
		pod + "/cpu.pressure":              "some avg10=23.50 avg60=4.00 avg300=1.00 total=123\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		pod + "/abc123/cpu.max":            "max 100000\n",
		pod + "/abc123/cpu.stat":           "usage_usec 900\n",
	})
	m := New(measure.New(root, testr.New(t), measure.WithAttach(measure.AttachNone)))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	in := Input{Pods: []podcgroup.Pod{{UID: uid, Namespace: "shop", Name: "api", OptedIn: true}}}
	if _, err := m.Collect(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	testroot.Write(t, root.Path(pod, "cpu.stat"), "usage_usec 9000\nnr_periods 200\nnr_throttled 60\nthrottled_usec 25000\n")
	res, err := m.Collect(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	mustFind(t, res.Findings, findings.FindingOptedInThrottled, "50 of 100 periods")
	mustFind(t, res.Findings, findings.FindingPodCPUPressure, "some avg10=23.50%")
}

// taskRoot is a temp-dir root holding one SCHED_FIFO task allowed on CPU 1
// (comm with spaces and parentheses, stat fields from a real 6.x kernel
// line) and one real-time kernel thread, which findings leave out.
func taskRoot(t *testing.T, runDelay, slices string) *host.Root {
	stat := "4242 (my (weird) app) S 1 4242 4242 0 -1 4194560 300 0 0 0 5 3 0 0 -51 0 1 0 12345 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 50 1 0 0 0 0 0 0 0 0 0 0 0\n"
	kthread := "7 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 0 0 0 -51 0 1 0 3 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 50 1 0 0 0 0 0 0 0 0 0 0 0\n"
	return testroot.Files(t, map[string]string{
		"proc/4242/task/4242/stat":      stat,
		"proc/4242/task/4242/status":    "Name:\tmy (weird) app\nCpus_allowed_list:\t1\n",
		"proc/4242/task/4242/schedstat": "100 " + runDelay + " " + slices + "\n",
		"proc/7/task/7/stat":            kthread,
		"proc/7/task/7/status":          "Name:\tksoftirqd/1\nCpus_allowed_list:\t1\n",
		"proc/7/task/7/schedstat":       "0 0 0\n",
		"proc/pressure/cpu":             "some avg10=1.50 avg60=0.20 avg300=0.00 total=123\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
	})
}

// The per-task reads (stat, status, schedstat, PSI) go through the host
// root: a temp-dir root stands in for the host's /proc.
// A real-time task is read through the host root: a temp-dir root stands
// in for the host's /proc.
func TestRTTaskReadThroughRoot(t *testing.T) {
	root := taskRoot(t, "2000", "10")
	fs := findingsOf(root, Input{Tuning: tuning("1", "0")})
	mustFind(t, fs, findings.FindingRTTasksIsolated, "1 real-time tasks", "my (weird) app (tid 4242, SCHED_FIFO prio 50, cpus 1)")
	mustNotFind(t, findingsOf(root, Input{Tuning: tuning("0", "1")}), findings.FindingRTTasksIsolated)
}

// With measurement disabled, a budgeted p99 is not measured: WithinBudget
// is Unknown.
func TestMeasurementDisabledBudgetUnknown(t *testing.T) {
	root := testroot.Files(t, map[string]string{})
	m := New(measure.New(root, testr.New(t), measure.WithAttach(measure.AttachNone)))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := m.Collect(context.Background(), Input{Tuning: v1alpha1.TuningSpec{
		Measurement:   &v1alpha1.MeasurementSpec{Source: v1alpha1.MeasurementDisabled},
		LatencyBudget: &v1alpha1.LatencyBudget{RunQueueP99: &metav1.Duration{Duration: time.Millisecond}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Budget.Status != metav1.ConditionUnknown || res.Budget.Reason != v1alpha1.ReasonNotMeasured {
		t.Errorf("budget %+v", res.Budget)
	}
}
