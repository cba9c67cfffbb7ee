package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

const waitFor = 30 * time.Second

// eventually polls f until it returns nil, failing with its last error.
func eventually(t testing.TB, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: still not true after %s: %v", what, waitFor, err)
}

func createNode(t testing.TB, name string, lbls map[string]string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	if err := k8s.Create(context.Background(), n); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	return n
}

func createProfile(t testing.TB, name string, priority int32, match map[string]string) *v1alpha1.LatencyProfile {
	t.Helper()
	p := &v1alpha1.LatencyProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gitops": "owned"}, Annotations: map[string]string{"argocd": "x"}},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: match},
			Priority:     priority,
			TuningSpec: v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{
				Autogroup: ptr.To(v1alpha1.Disabled),
			}},
		},
	}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatalf("creating profile %s: %v", name, err)
	}
	return p
}

// cleanup deletes the test's nodes first (so nothing waits for an agent),
// then its profiles, and waits until the profiles and LatencyNodes are gone.
func cleanup(t testing.TB, nodes []string, profiles []string) {
	t.Cleanup(func() {
		ctx := context.Background()
		for _, n := range nodes {
			_ = client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}))
		}
		for _, p := range profiles {
			_ = client.IgnoreNotFound(k8s.Delete(ctx, &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: p}}))
		}
		for _, p := range profiles {
			eventually(t, "profile "+p+" gone", func() error { return gone(&v1alpha1.LatencyProfile{}, p) })
		}
		for _, n := range nodes {
			eventually(t, "LatencyNode "+n+" gone", func() error { return gone(&v1alpha1.LatencyNode{}, n) })
		}
	})
}

func gone(obj client.Object, name string) error {
	err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%s still exists", name)
}

func getNode(t testing.TB, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, n); err != nil {
		t.Fatalf("getting node %s: %v", name, err)
	}
	return n
}

func getLN(name string) (*v1alpha1.LatencyNode, error) {
	ln := &v1alpha1.LatencyNode{}
	return ln, k8s.Get(context.Background(), types.NamespacedName{Name: name}, ln)
}

func getProfile(t testing.TB, name string) *v1alpha1.LatencyProfile {
	t.Helper()
	p := &v1alpha1.LatencyProfile{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, p); err != nil {
		t.Fatalf("getting profile %s: %v", name, err)
	}
	return p
}

// expectApplying waits until node carries profile's label and a LatencyNode
// applying the profile's current generation.
func expectApplying(t testing.TB, node, profile string) *v1alpha1.LatencyNode {
	t.Helper()
	var ln *v1alpha1.LatencyNode
	eventually(t, node+" applies "+profile, func() error {
		n := &corev1.Node{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: node}, n); err != nil {
			return err
		}
		if got := n.Labels[v1alpha1.ProfileLabel]; got != profile {
			return fmt.Errorf("label = %q", got)
		}
		var err error
		if ln, err = getLN(node); err != nil {
			return err
		}
		if ln.Spec.Action != v1alpha1.ActionApply || ln.Spec.Profile != profile {
			return fmt.Errorf("LatencyNode spec = %s %s", ln.Spec.Action, ln.Spec.Profile)
		}
		return nil
	})
	return ln
}

// expectReverting waits until the node's LatencyNode asks for a revert.
func expectReverting(t testing.TB, node string) {
	t.Helper()
	eventually(t, node+" reverting", func() error {
		ln, err := getLN(node)
		if err != nil {
			return err
		}
		if ln.Spec.Action != v1alpha1.ActionRevert {
			return fmt.Errorf("action = %s", ln.Spec.Action)
		}
		return nil
	})
}

// expectReleased waits until the node has no LatencyNode and no profile label.
func expectReleased(t testing.TB, node string) {
	t.Helper()
	eventually(t, node+" released", func() error {
		if err := gone(&v1alpha1.LatencyNode{}, node); err != nil {
			return err
		}
		n := &corev1.Node{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: node}, n); err != nil {
			return err
		}
		if v, ok := n.Labels[v1alpha1.ProfileLabel]; ok {
			return fmt.Errorf("label still %q", v)
		}
		if v, ok := n.Annotations[v1alpha1.OwnedLabelsAnnotation]; ok {
			return fmt.Errorf("owned annotation still %q", v)
		}
		return nil
	})
}

// playAgent patches the node's LatencyNode status as its agent would: the
// current spec observed, with conds.
func playAgent(t testing.TB, node string, conds ...metav1.Condition) {
	t.Helper()
	eventually(t, "agent status on "+node, func() error {
		ln, err := getLN(node)
		if err != nil {
			return err
		}
		patched := ln.DeepCopy()
		patched.Status.ObservedGeneration = ln.Generation
		patched.Status.Profile = ln.Spec.Profile
		patched.Status.ProfileGeneration = ln.Spec.ProfileGeneration
		for _, c := range conds {
			c.ObservedGeneration = ln.Generation
			meta.SetStatusCondition(&patched.Status.Conditions, c)
		}
		return k8s.Status().Patch(context.Background(), patched, client.MergeFromWithOptions(ln, client.MergeFromWithOptimisticLock{}))
	})
}

// expectEvent waits for an event with reason about the named object.
func expectEvent(t testing.TB, regarding, reason string) {
	t.Helper()
	eventually(t, "event "+reason+" on "+regarding, func() error {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == regarding && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no %s event among %d", reason, len(list.Items))
	})
}

// expectCondition waits for the profile's condition typ to be status/reason.
func expectCondition(t testing.TB, profile, typ string, status metav1.ConditionStatus, reason string) *v1alpha1.LatencyProfile {
	t.Helper()
	var p *v1alpha1.LatencyProfile
	eventually(t, profile+" "+typ, func() error {
		p = &v1alpha1.LatencyProfile{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: profile}, p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("condition = %+v", c)
		}
		return nil
	})
	return p
}
