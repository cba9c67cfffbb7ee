package loop

import (
	"context"
	"fmt"
	"maps"
	"os"
	"testing"

	"github.com/containerd/nri/pkg/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/nri"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

type recordingHook struct {
	grants *nri.Grants
	state  nri.State
}

func (h *recordingHook) Publish(g *nri.Grants) { h.grants = g }
func (h *recordingHook) State() nri.State      { return h.state }

func TestHookCondition(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   metav1.ConditionStatus
	}{
		{v1alpha1.ReasonHookConnected, metav1.ConditionTrue},
		{v1alpha1.ReasonHookNoSocket, metav1.ConditionFalse},
		{v1alpha1.ReasonHookDisconnected, metav1.ConditionFalse},
	} {
		c := hookCondition(nri.State{Reason: tc.reason, Message: "m"})
		if c.Type != v1alpha1.NodeRuntimeHookConnected || c.Status != tc.want || c.Reason != tc.reason || c.Message != "m" {
			t.Errorf("%s: %+v", tc.reason, c)
		}
	}
}

// TestPublishGrants: a pass hands the hook the spec's tuning and every
// namespace's labels, so a pod in a granted namespace with no pod on the
// node yet is decided at its first container; nil withdraws them.
func TestPublishGrants(t *testing.T) {
	sel := &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{"tier": "latency"}}
	c := fake.NewClientBuilder().WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "trading", Labels: map[string]string{"tier": "latency"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "web"}}).Build()
	h := &recordingHook{}
	r := &Reconciler{Client: c, NodeName: "n1", Hook: h}
	ln := &v1alpha1.LatencyNode{Spec: v1alpha1.LatencyNodeSpec{Tuning: v1alpha1.TuningSpec{
		CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove, NamespaceSelector: sel},
		CPUs:     &v1alpha1.CPUSpec{Isolated: ptr.To("2-3"), NamespaceSelector: sel}}}}
	r.publishGrants(context.Background(), ln, "0-3")
	if h.grants == nil {
		t.Fatal("nothing published")
	}
	ask := map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}
	d := nri.Decide(h.grants, &api.PodSandbox{Namespace: "trading", Annotations: ask}, &api.Container{})
	if !d.RemoveQuota || d.CPUs != "2-3" {
		t.Errorf("granted namespace decided %+v", d)
	}
	if d := nri.Decide(h.grants, &api.PodSandbox{Namespace: "web", Annotations: ask}, &api.Container{}); !d.Empty() {
		t.Errorf("non-granted namespace decided %+v", d)
	}
	r.publish(nil)
	if h.grants != nil {
		t.Error("grants not withdrawn")
	}
}

// TestPublishGrantsRealtime: realtime is granted at creation only where the
// kernel would not refuse a real-time container (no RT group scheduling)
// and the agent shares the host's pid namespace.
func TestPublishGrantsRealtime(t *testing.T) {
	sel := &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{"tier": "latency"}}
	c := fake.NewClientBuilder().WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "trading", Labels: map[string]string{"tier": "latency"}}}).Build()
	ln := &v1alpha1.LatencyNode{Spec: v1alpha1.LatencyNodeSpec{Tuning: v1alpha1.TuningSpec{
		CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove, NamespaceSelector: sel},
		CPUs:     &v1alpha1.CPUSpec{Isolated: ptr.To("2-3"), NamespaceSelector: sel},
		Realtime: &v1alpha1.RealtimeSpec{NamespaceSelector: sel}}}}
	ask := map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable, v1alpha1.SchedPolicyAnnotation: "fifo:20"}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  bool
	}{
		// A kernel BTF whose strings lack sched_group_set_rt_runtime: built
		// without RT group scheduling.
		{"cgroup v2", map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset cpu\n", "sys/kernel/btf/vmlinux": "\x00sched_setattr\x00"}, true},
		{"cgroup v2 without the kernel's BTF", map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset cpu\n"}, false},
		{"RT group scheduling", map[string]string{"sys/fs/cgroup/cpu,cpuacct/cpu.rt_runtime_us": "950000\n"}, false},
		// It could not journal or restore the thread it started so.
		{"agent outside the host's pid namespace", map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset cpu\n",
			"proc/self/status": "Name:\tagent\nNSpid:\t4242\t1\n"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &recordingHook{}
			files := map[string]string{"proc/self/status": fmt.Sprintf("Name:\tagent\nNSpid:\t%d\n", os.Getpid())}
			maps.Copy(files, tc.files)
			r := &Reconciler{Client: c, NodeName: "n1", Hook: h, Root: testroot.New(t, files)}
			r.publishGrants(context.Background(), ln, "0-3")
			d := nri.Decide(h.grants, &api.PodSandbox{Namespace: "trading", Annotations: ask}, &api.Container{})
			if got := d.Sched.Realtime(); got != tc.want {
				t.Errorf("real-time at creation %v (decided %+v, refused %q), want %v", got, d, h.grants.RTRefused, tc.want)
			}
		})
	}
}
