package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
)

// Managed reboots of nodes that leave: a node that left the profile's
// selection (or whose LatencyNode another profile took over) is let go,
// uncordoned and its record cleared; a reboot already requested of it is
// taken back first, and the node stays cordoned until that request can no
// longer reboot it; a node released while its LatencyNode still holds a
// record is uncordoned before the record goes with the LatencyNode.

// letGoOfReboot uncordons a node whose LatencyNode, about to be deleted,
// still holds a reboot record: the managed reboots cordoned it (they write
// the record before the cordon and clear it after the uncordon). The
// profile's pass that would let the node go may never come (the profile is
// gone) or come after the deletion (it lost the race to this one), and the
// node would stay cordoned for good. Only the manager's own cordon is
// lifted, the one carrying its marker (executor.Uncordon): a person's stays.
func (r *nodeSelection) letGoOfReboot(ctx context.Context, node *corev1.Node, ln *v1alpha1.LatencyNode) error {
	if !planner.UncordonOnRelease(ln, node) {
		return nil
	}
	if wrote, err := r.exec().Uncordon(ctx, node); err != nil {
		return fmt.Errorf("uncordoning node %s: %w", node.Name, err)
	} else if !wrote {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Uncordoned the node its managed reboot had cordoned", "revision", ln.Spec.Reboot.Revision,
		"phase", ln.Spec.Reboot.Phase)
	return nil
}
