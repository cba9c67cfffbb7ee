package profilestatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
)

// TestStoppedRolloutIsNotApplying: after a rollback the node holds the
// previous revision by decision. The profile said Ready False "Applying"
// and Progressing True, as if the new revision were on its way (seen on
// the local cluster); it now says RolledBack (or Paused) with the
// rollout's message, and nothing is progressing.
func TestStoppedRolloutIsNotApplying(t *testing.T) {
	for _, phase := range []v1alpha1.RolloutPhase{v1alpha1.RolloutRolledBack, v1alpha1.RolloutPaused} {
		t.Run(string(phase), func(t *testing.T) {
			p := profile("p", 0, rt)
			p.Spec.Rollout = &v1alpha1.RolloutSpec{}
			st := runStatus(statusCase{
				profile: p,
				nodes:   []corev1.Node{tnode("a", rt, "", 0)},
				lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
					ln := lnFor("a", p, 0, "", applied)
					ln.Spec.Action, ln.Spec.Revision = v1alpha1.ActionApply, "p-old"
					return []*v1alpha1.LatencyNode{ln}
				},
				rollout: &v1alpha1.RolloutStatus{Phase: phase, Revision: planner.CurrentRevision(&p), Message: "node a regressed"},
			})
			ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ProfileReady)
			progressing := meta.FindStatusCondition(st.Conditions, v1alpha1.ProfileProgressing)
			if ready == nil || progressing == nil {
				t.Fatalf("conditions %+v", st.Conditions)
			}
			if ready.Status != "False" || ready.Reason != string(phase) || progressing.Status != "False" || progressing.Reason != string(phase) {
				t.Fatalf("Ready %s/%s (%s), Progressing %s/%s (%s); want False/%s for both",
					ready.Status, ready.Reason, ready.Message, progressing.Status, progressing.Reason, progressing.Message, phase)
			}
			if st.Rollout == nil || st.Rollout.Phase != phase {
				t.Errorf("status.rollout = %+v", st.Rollout)
			}
		})
	}
}
