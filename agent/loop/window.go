package loop

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// windowRequest marks the request a measurement window enqueues (in the
// namespace field: LatencyNodes are cluster-scoped, so no pass of the
// LatencyNode itself carries one). The workqueue keeps it apart from the
// LatencyNode's own request, so a window never merges into, or becomes, a
// full pass.
const windowRequest = "latencytier.io/measurement-window"

// lastPass is what the newest full pass computed for a LatencyNode.
type lastPass struct {
	uid        types.UID
	generation int64
	// measured says the pass copied the window into status (Apply and
	// Baseline; a Revert pass does not).
	measured bool
	// status is the pass's status before evidence, findings the pass's own
	// before measure added the window's.
	status   v1alpha1.LatencyNodeStatus
	findings []v1alpha1.Finding
}

// windowPass writes a measurement window into status without a probe,
// render or apply: the newest full pass's status with the window's figures,
// findings and evidence in place of the previous window's. Without a full
// pass of the LatencyNode's current generation to start from, it runs one.
// A window pass never requeues itself: the LatencyNode's own request keeps
// the resync and heartbeat schedule.
func (r *Reconciler) windowPass(ctx context.Context, name types.NamespacedName) (reconcile.Result, error) {
	_, err := r.windowOnce(ctx, name)
	return reconcile.Result{}, err
}

func (r *Reconciler) windowOnce(ctx context.Context, name types.NamespacedName) (reconcile.Result, error) {
	ln := &v1alpha1.LatencyNode{}
	err := r.Client.Get(ctx, name, ln)
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("get LatencyNode %s: %w", name.Name, err)
	}
	r.ownStatus(ln)
	last := r.last
	if last == nil || last.uid != ln.UID || last.generation != ln.Generation {
		return r.pass(ctx, reconcile.Request{NamespacedName: name})
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Writing a measurement window into status without a pass")
	baseline, current := r.evidence(ln)
	st := *last.status.DeepCopy()
	if last.measured {
		st.Findings = slices.Clone(last.findings)
		r.measure(ctx, ln, &st)
	}
	st.Baseline, st.Current = baseline, current
	return r.report(ctx, ln, st)
}
