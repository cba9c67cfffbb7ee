package loop

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"latencytier.io/latencytier/agent/nri"
	"latencytier.io/latencytier/agent/rtsched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// RuntimeHook is the agent's NRI plugin as the loop sees it: told what
// grants a container after every pass, asked whether it is connected.
type RuntimeHook interface {
	Publish(*nri.Grants)
	State() nri.State
}

// publish hands the hook what decides a container (nil: nothing is
// granted, under Revert, Baseline or without a LatencyNode).
func (r *Reconciler) publish(g *nri.Grants) {
	if r.Hook != nil {
		r.Hook.Publish(g)
	}
}

// publishGrants gives the hook this pass's tuning, the labels of every
// namespace (a pod created in a namespace that has none yet is decided
// too), the online CPUs, and why a container created real-time could fail
// to start here (rtsched.CreateRefused; the hook then leaves the policy to
// the file path). A failed namespace read grants nothing until
// the next pass: the file path still tunes the container then.
func (r *Reconciler) publishGrants(ctx context.Context, ln *v1alpha1.LatencyNode, online string) {
	if r.Hook == nil {
		return
	}
	ns, err := r.namespaceLabels(ctx, ln.Spec.Tuning)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Withdrew the NRI hook's grants: could not read namespaces")
		r.Hook.Publish(nil)
		return
	}
	g := &nri.Grants{Tuning: *ln.Spec.Tuning.DeepCopy(), Namespaces: ns, Online: online}
	if g.Tuning.Realtime != nil {
		g.RTRefused = "the agent has no host root to check the kernel's real-time group scheduling"
		if r.Root != nil {
			g.RTRefused = rtsched.CreateRefused(r.Root)
		}
	}
	r.Hook.Publish(g)
}

// hookCondition is RuntimeHookConnected from the plugin's state.
func hookCondition(s nri.State) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.NodeRuntimeHookConnected, Status: metav1.ConditionFalse, Reason: s.Reason, Message: s.Message}
	if s.Reason == v1alpha1.ReasonHookConnected {
		c.Status = metav1.ConditionTrue
	}
	return c
}
