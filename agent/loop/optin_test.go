package loop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"latencytier.io/latencytier/agent/cpuquota"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

const tenantLabel = "latencytier.io/latency-tenant"

// The running agent against a real API server: both pods carry the opt-in
// annotation, only the gateway namespace is granted by the profile. The
// tenant pod keeps its CFS quota, its setting is Refused naming the pod, the
// namespace and cpuQuota.namespaceSelector, the node is still Applied, and
// the pod gets one QuotaOptInRefused event. Labelling the tenant namespace
// grants it.
func TestAgentRefusesOptInOutsideTheNamespaceGrant(t *testing.T) {
	c, env := startAPI(t)
	ctx := context.Background()
	for ns, labels := range map[string]map[string]string{"gateway": {tenantLabel: "true"}, "tenant": nil} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	root := fakeHost(t)
	cpuMax := map[string]string{}
	var sneakyID string
	for ns, name := range map[string]string{"gateway": "gw", "tenant": "sneaky"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}},
			Spec: corev1.PodSpec{NodeName: "node-q", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		cpuMax[ns] = root.Cgroup("kubepods", "burstable", "pod"+string(pod.UID), "cpu.max")
		if ns == "tenant" {
			sneakyID = cpuquota.PodID(podcgroup.Pod{UID: string(pod.UID), Namespace: ns, Name: name})
		}
		testroot.Write(t, cpuMax[ns], "150000 100000\n")
	}
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-q"},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "gateway", ProfileGeneration: 1,
			Tuning: v1alpha1.TuningSpec{CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove,
				NamespaceSelector: &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{tenantLabel: "true"}}}}}}
	if err := c.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	measured := startAgentMeasured(t, env, root, "node-q")

	key := types.NamespacedName{Name: "node-q"}
	var refused *v1alpha1.SettingResult
	eventually(t, "the tenant pod's opt-in Refused in status", func() bool {
		refused = nil
		if c.Get(ctx, key, ln) != nil {
			return false
		}
		for i := range ln.Status.Settings {
			if s := ln.Status.Settings[i]; s.Setting == sneakyID && s.State == v1alpha1.SettingRefused {
				refused = &ln.Status.Settings[i]
			}
		}
		return refused != nil
	})
	for _, w := range []string{"tenant/sneaky", "namespace tenant", "cpuQuota.namespaceSelector"} {
		if !strings.Contains(refused.Message, w) {
			t.Errorf("Refused message %q does not name %q", refused.Message, w)
		}
	}
	eventually(t, "the granted pod's quota removed", func() bool { return testroot.Read(t, cpuMax["gateway"]) == "max 100000" })
	// Measurement holds only the granted pod's throttling against the
	// budget: it sees the grant, not the annotation.
	optedIn := map[string]bool{}
	for _, p := range measured() {
		optedIn[p.Name] = p.OptedIn
	}
	if len(optedIn) != 2 || !optedIn["gw"] || optedIn["sneaky"] {
		t.Errorf("measurement saw OptedIn %v; want gw true, sneaky false", optedIn)
	}
	if got := testroot.Read(t, cpuMax["tenant"]); got != "150000 100000" {
		t.Fatalf("tenant pod's cpu.max = %q; want its limit kept", got)
	}
	if !conditionIs(ln, v1alpha1.NodeApplied, metav1.ConditionTrue) {
		t.Errorf("a refused opt-in marked the node not Applied: %+v", ln.Status.Conditions)
	}
	var evs eventsv1.EventList
	eventually(t, "a QuotaOptInRefused event on the tenant pod", func() bool {
		return c.List(ctx, &evs, client.InNamespace("tenant")) == nil && len(evs.Items) > 0
	})
	if e := evs.Items[0]; len(evs.Items) != 1 || e.Regarding.Name != "sneaky" || e.Reason != desired.ReasonQuotaOptInRefused ||
		e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, "cpuQuota.namespaceSelector") {
		t.Fatalf("events in tenant = %+v; want one Warning QuotaOptInRefused on sneaky", evs.Items)
	}

	// The cluster admin grants the tenant namespace.
	tenant := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: "tenant"}, tenant); err != nil {
		t.Fatal(err)
	}
	tenant.Labels[tenantLabel] = "true"
	if err := c.Update(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the tenant pod's quota removed once granted", func() bool { return testroot.Read(t, cpuMax["tenant"]) == "max 100000" })
}

// startAgentMeasured is startAgent with a Meter (a real Measurer on the
// fake host, schedstat only, on a fake clock); it returns the pods the
// agent last handed to measurement.
func startAgentMeasured(t *testing.T, env *envtest.Environment, root *host.Root, nodeName string) func() []podcgroup.Pod {
	t.Helper()
	meter, _ := newTestMeter(t, root)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{NodeName: nodeName, Root: root, Resync: 300 * time.Millisecond, Log: testr.New(t),
			Config: env.Config, Meter: meter})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return func() []podcgroup.Pod {
		meter.mu.Lock()
		defer meter.mu.Unlock()
		return meter.held.in.Pods
	}
}

// A refusal is told once while it lasts, not on every pass; once it ends
// and comes back it is told again.
func TestRefusalEventOncePerRefusal(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Recorder: rec}
	f := desired.Refusal{Pod: podcgroup.Pod{UID: "u1", Namespace: "tenant", Name: "sneaky"}, Field: "cpuQuota.namespaceSelector",
		Reason: desired.ReasonQuotaOptInRefused, Result: v1alpha1.SettingResult{Message: "refused"}}
	ctx := context.Background()
	for range 5 {
		r.reportRefusals(ctx, []desired.Refusal{f})
	}
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d events over 5 passes with one lasting refusal; want 1", n)
	}
	if e := <-rec.Events; !strings.Contains(e, "Warning QuotaOptInRefused") {
		t.Fatalf("event = %q", e)
	}
	r.reportRefusals(ctx, nil)
	r.reportRefusals(ctx, []desired.Refusal{f})
	select {
	case <-rec.Events:
	case <-time.After(time.Second):
		t.Fatal("a refusal that ended and came back was not told again")
	}
}

// One event per cause: a pod refused for two causes (its threads may run
// on shared CPUs; it has too many threads) is told twice, once each, however
// many passes the refusals last.
func TestRefusalEventOncePerCause(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Recorder: rec}
	pod := podcgroup.Pod{UID: "u1", Namespace: "tenant", Name: "spin"}
	refusals := []desired.Refusal{
		{Pod: pod, Field: rtsched.CauseCPUs, Reason: desired.ReasonRealtimeRefused, Result: v1alpha1.SettingResult{Message: "cpus"}},
		{Pod: pod, Field: rtsched.CauseThreads, Reason: desired.ReasonRealtimeRefused, Result: v1alpha1.SettingResult{Message: "threads"}},
	}
	for range 5 {
		r.reportRefusals(context.Background(), refusals)
	}
	if n := len(rec.Events); n != 2 {
		t.Fatalf("%d events over 5 passes with two lasting causes; want 2", n)
	}
}
