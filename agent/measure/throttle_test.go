package measure

import (
	"context"
	"fmt"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/measure/throttling"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/internal/hostfixture"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
)

// TestThrottlingCgroupV2Fixture covers the v2 layout (cpu.max, cpu.stat
// throttled_usec, cpu.pressure) that this cgroup v1 machine lacks.
func TestThrottlingCgroupV2Fixture(t *testing.T) {
	uid := hostfixture.ThrottledPodUID
	root, pod := hostfixture.ThrottledPodV2(t)
	m := New(root, testr.New(t), WithAttach(AttachNone))
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
	if len(res.Throttling) != 1 {
		t.Fatalf("throttling %+v", res.Throttling)
	}
	pt := res.Throttling[0]
	if pt.Periods != 100 || pt.Throttled != 50 || pt.Ratio != "0.5000" || pt.ThrottledTime.Duration != 20*time.Millisecond {
		t.Errorf("v2 deltas %+v (throttled %s)", pt, pt.ThrottledTime.Duration)
	}
}

// TestEvidenceThrottlingIsTheMeasuredPods': the rollout's throttled ratio
// comes from the measured pods only; a throttled pod outside the tier (a
// CFS limit, not opted in, not selected) does not sway it.
func TestEvidenceThrottlingIsTheMeasuredPods(t *testing.T) {
	tier := map[string]string{"latencytier.io/tier": "true"}
	tuning := v1alpha1.TuningSpec{Measurement: &v1alpha1.MeasurementSpec{
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "latency"}},
		NamespaceSelector: &v1alpha1.NamespaceSelector{MatchLabels: tier}}}
	highestMeasured := func(ps []throttling.Pod, t v1alpha1.TuningSpec) (string, bool) {
		r := throttling.Summarise(ps, func(p podcgroup.Pod) bool { return measured(t, p) }).MeasuredRatio
		return r, r != ""
	}
	batch := throttling.Pod{Pod: podcgroup.Pod{Name: "batch", NamespaceLabels: tier}, Delta: throttling.Stat{Periods: 10, Throttled: 9}}
	selected := throttling.Pod{Pod: podcgroup.Pod{Name: "api", Labels: map[string]string{"tier": "latency"}, NamespaceLabels: tier}, Delta: throttling.Stat{Periods: 10, Throttled: 1}}
	granted := throttling.Pod{Pod: podcgroup.Pod{Name: "gw", Isolated: true}, Delta: throttling.Stat{Periods: 10, Throttled: 2}}
	if r, ok := highestMeasured([]throttling.Pod{batch, selected, granted}, tuning); !ok || r != "0.2000" {
		t.Errorf("highest measured = %v, %v; want 0.2 (the isolated pod), not the batch pod's 0.9", r, ok)
	}
	if _, ok := highestMeasured([]throttling.Pod{batch}, tuning); ok {
		t.Error("a node with only an unmeasured pod has a measured throttled ratio")
	}
	if r, ok := highestMeasured([]throttling.Pod{selected}, tuning); !ok || r != "0.1000" {
		t.Errorf("a selected pod of a granted namespace: %v, %v; want 0.1", r, ok)
	}
	// A tenant labels its own pod like the tier's, in a namespace
	// measurement.namespaceSelector does not select: it is not evidence.
	impostor := throttling.Pod{Pod: podcgroup.Pod{Namespace: "tenant", Name: "fake-api", Labels: map[string]string{"tier": "latency"},
		NamespaceLabels: map[string]string{"team": "tenant"}}, Delta: throttling.Stat{Periods: 10, Throttled: 10}}
	if r, ok := highestMeasured([]throttling.Pod{selected, granted, impostor}, tuning); !ok || r != "0.2000" {
		t.Errorf("with a tenant's look-alike pod: %v, %v; want 0.2, the tenant's 1.0 not counted", r, ok)
	}
	// Without a namespace grant podSelector selects no pod at all.
	open := v1alpha1.TuningSpec{Measurement: &v1alpha1.MeasurementSpec{PodSelector: tuning.Measurement.PodSelector}}
	if _, ok := highestMeasured([]throttling.Pod{selected, impostor}, open); ok {
		t.Error("podSelector without measurement.namespaceSelector measured a pod")
	}
}

// TestThrottlingPodsPastTheStatusBound: status lists the throttling.MaxListed most
// throttled pods; Pods (what the agent's metrics count) keeps every one.
func TestThrottlingPodsPastTheStatusBound(t *testing.T) {
	files := map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset cpu\n"}
	var pods []podcgroup.Pod
	for i := range throttling.MaxListed + 3 {
		uid := fmt.Sprintf("0b5e6f1c-0000-4000-8000-%012d", i)
		files["sys/fs/cgroup/kubepods/pod"+uid+"/cpu.max"] = "50000 100000\n"
		files["sys/fs/cgroup/kubepods/pod"+uid+"/cpu.stat"] = "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"
		pods = append(pods, podcgroup.Pod{UID: uid, Namespace: "shop", Name: fmt.Sprintf("api-%d", i)})
	}
	root := testroot.Files(t, files)
	m := New(root, testr.New(t), WithAttach(AttachNone))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	in := Input{Pods: pods}
	if _, err := m.Collect(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	res, err := m.Collect(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Throttling) != throttling.MaxListed || len(res.AllThrottling) != len(pods) {
		t.Errorf("status lists %d pods (want %d), AllThrottling %d (want %d)", len(res.Throttling), throttling.MaxListed, len(res.AllThrottling), len(pods))
	}
}
