//go:build privileged

package measure

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
)

// TestPodRunDelayCountsOnlyThePodsTasks: the BPF program's pod histogram
// holds the run delay of the measured pods' tasks and of no other task.
// A measured pod whose one process sleeps records no wakeup while the node
// records many; once a process in the pod wakes up in a loop, the pod
// records its waits (and never more than the node). A pod that is neither
// granted a tuning nor matched by measurement.podSelector gets no figure.
// It writes only its own uniquely named cgroups (no kernellock).
func TestPodRunDelayCountsOnlyThePodsTasks(t *testing.T) {
	pod := cgtest.V1Pod(t, "cpu", podcgroup.DriverCgroupfs, "ltmeasure-", nil)
	cgtest.StartIn(t, pod.CtrDir, "sleep", "600")
	m := New(host.New("/"), testr.New(t), WithPodcgroup(podcgroup.WithKubepods(pod.Kubepods)))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if m.Tracer() == nil {
		t.Fatalf("BPF did not load here (%s): the pod histogram needs it", m.Source())
	}
	startLoad(t, loadSwitch, 10*time.Second) // wakeups outside the pod
	selected := v1alpha1.TuningSpec{Measurement: &v1alpha1.MeasurementSpec{
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "latency"}},
		NamespaceSelector: &v1alpha1.NamespaceSelector{}}}
	in := Input{Tuning: selected, Pods: []podcgroup.Pod{{UID: pod.UID, Namespace: "shop", Name: "api",
		Labels: map[string]string{"tier": "latency"}}}}
	window := func() *Result {
		t.Helper()
		time.Sleep(500 * time.Millisecond)
		res, err := m.Collect(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := window(); res.Pods != nil {
		t.Fatalf("the first window began before the pod was known: %+v", res.Pods)
	}
	res := window()
	if res.Pods == nil || res.Latency == nil {
		t.Fatalf("a pod matched by measurement.podSelector got no figure: pods %+v latency %+v", res.Pods, res.Latency)
	}
	node := res.Latency.Classes[0].Samples
	t.Logf("sleeping pod: %d samples, node %d", res.Pods.Samples, node)
	if res.Pods.Samples != 0 || node < 100 {
		t.Fatalf("a pod whose only process sleeps recorded %d wakeups (node %d): other tasks leak into it", res.Pods.Samples, node)
	}

	cgtest.StartIn(t, pod.CtrDir, "sh", "-c", "while :; do sleep 0.01; done")
	window()
	res = window()
	t.Logf("waking pod: %d samples, p99 %v; node %d", res.Pods.Samples, res.Pods.P99, res.Latency.Classes[0].Samples)
	if res.Pods.Samples < 10 || res.Pods.Samples > res.Latency.Classes[0].Samples || res.Pods.P99 == nil {
		t.Fatalf("a pod waking every 10 ms recorded %d wakeups (node %d)", res.Pods.Samples, res.Latency.Classes[0].Samples)
	}

	in.Tuning = v1alpha1.TuningSpec{}
	window() // the pod is still measured in this window; not in the next
	if res := window(); res.Pods != nil {
		t.Fatalf("a pod neither granted nor selected got a figure: %+v", res.Pods)
	}
}
