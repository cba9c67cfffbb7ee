package loop

import (
	"context"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// refuseStatus makes the API server refuse every write of LatencyNode
// name's status (an admission policy), and returns once it does.
func refuseStatus(t *testing.T, c client.Client, name string) {
	t.Helper()
	ctx := context.Background()
	pol := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "refuse-status"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"latencynodes/status"}}}}}},
			Validations: []admissionv1.Validation{{Expression: "request.name != '" + name + "'", Message: "test: status refused"}},
		}}
	bind := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "refuse-status"},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: pol.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	for _, o := range []client.Object{pol, bind} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the policy in force", func() bool {
		ln := &v1alpha1.LatencyNode{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, ln); err != nil {
			return false
		}
		orig := ln.DeepCopy()
		ln.Status.Profile = "probe"
		return c.Status().Patch(ctx, ln, client.MergeFrom(orig)) != nil
	})
}

// A status patch the API server refuses is logged and reported in one
// Warning event on the LatencyNode, and drift is still re-asserted at the
// resync pace: the refusal is not a workqueue error, whose backoff (5ms
// doubling per failure) would have grown past ten seconds here.
func TestRefusedStatusKeepsReasserting(t *testing.T) {
	c, env := startAPI(t)
	ctx := context.Background()
	if err := c.Create(ctx, &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-r"}, Spec: spec()}); err != nil {
		t.Fatal(err)
	}
	refuseStatus(t, c, "node-r")
	root := fakeHost(t)
	autogroup := root.Proc("sys", "kernel", "sched_autogroup_enabled")
	startAgent(t, env, root, "node-r")
	eventually(t, "tuned", func() bool { return testroot.Read(t, autogroup) == "0" })
	time.Sleep(12 * time.Second)

	testroot.Write(t, autogroup, "1")
	deadline := time.Now().Add(4 * time.Second)
	for testroot.Read(t, autogroup) != "0" {
		if time.Now().After(deadline) {
			t.Fatal("drift not re-asserted within 4s (resync 300ms) while status patches are refused")
		}
		time.Sleep(50 * time.Millisecond)
	}

	var refused []eventsv1.Event
	eventually(t, "a StatusRefused event", func() bool {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return false
		}
		refused = nil
		for _, e := range list.Items {
			if e.Reason == eventStatusRefused && e.Regarding.Name == "node-r" && e.Regarding.Kind == "LatencyNode" {
				refused = append(refused, e)
			}
		}
		return len(refused) > 0
	})
	if len(refused) != 1 || refused[0].Type != corev1.EventTypeWarning || refused[0].Series != nil {
		t.Errorf("events = %+v; want one Warning, not repeated", refused)
	}
}
