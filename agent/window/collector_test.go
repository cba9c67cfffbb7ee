package window

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-logr/logr/testr"
	"latencytier.io/latencytier/agent/findings"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/hostfixture"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
)

// An opted-in pod throttled and waiting for CPU in a cgroup v2 fixture is
// judged in the window: OptedInPodThrottled and PodCPUPressure.
func TestThrottlingFindingsCgroupV2Fixture(t *testing.T) {
	uid := hostfixture.ThrottledPodUID
	root, pod := hostfixture.ThrottledPodV2(t)
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

// taskRoot is the shared fixture: one SCHED_FIFO task allowed on CPU 1 and
// one real-time kernel thread (hostfixture.RTTasks).
func taskRoot(t *testing.T, runDelay, slices string) *host.Root {
	return hostfixture.RTTasks(t, runDelay, slices)
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
