package rollout

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/profilestatus"
)

// The rollout's verdicts: each node's judgement under the revision it holds
// (verdict.go judges the evidence), and the list status.rollout.verdicts
// shows of them.

// verdictOf judges a node holding a revision once a full window under it
// ended verificationWindow after the move. Baseline and Revert judge
// nothing and keep the verdict on record, so a node reverted by a rollback
// still says why (Regressed, with the figures) and is counted so; so does
// a node of a rollout that holds another revision than the target (rolled
// back to the previous one, or not reached yet) once it has a verdict: its
// baseline may be the regressed window, against which the old tuning
// would read "Improved".
func (d *decider) verdictOf(n *Node) *Verdict {
	if n.Action != v1alpha1.ActionApply || (d.in.Policy != nil && n.Revision != d.in.Target && n.Verdict != nil) {
		return n.Verdict
	}
	cur := n.Current
	if cur == nil || cur.Action != v1alpha1.ActionApply || cur.Revision != n.Revision {
		cur = nil
	}
	if p := d.in.Policy; p != nil && cur != nil && n.Revision == d.in.Target && cur.MeasuredAt.Time.Before(n.SetAt.Add(Window(p))) {
		v := Verdict{v1alpha1.VerdictInconclusive, "verifying until " + n.SetAt.Add(Window(p)).UTC().Format(time.RFC3339)}
		d.wake(n.SetAt.Add(Window(p)))
		return &v
	}
	if d.in.Policy == nil && cur == nil {
		// Evidence only, and no window under this tuning yet: nothing new
		// to say, and "not measured yet" on every node of a fleet would be
		// a status write per node for no information (twice per change,
		// with the verdict that follows). A verdict of an earlier spec
		// stands, its revision saying which, until the first window
		// replaces it; when nothing will be measured it goes.
		if d.in.Unmeasured {
			return nil
		}
		return n.Verdict
	}
	v := judge(d.in.Gate, n.Baseline, cur)
	if d.in.Policy == nil && n.Verdict != nil && n.VerdictCurrent && sameFinding(*n.Verdict, v) {
		// Evidence only: the figures of the first window that found it
		// stand; a later window's are not worth a profile status write
		// per interval.
		return n.Verdict
	}
	return &v
}

// maxVerdicts caps status.rollout.verdicts (the CRD's MaxItems).
const maxVerdicts = 32

// verdictList is status.rollout.verdicts: the nodes whose verdict is not
// a pass, Regressed first, then by name, at most maxVerdicts, and how many
// were left out. A verdict keeps its lastTransitionTime from the previous
// list while its reason holds; a kept one is copied as it was.
func (d *decider) verdictList() ([]v1alpha1.NodeVerdictStatus, int32) {
	prev := verdictsOnRecord(d.in.Last)
	var list []v1alpha1.NodeVerdictStatus
	for _, n := range d.in.Nodes {
		v := d.plan.Verdicts[n.Name]
		if v == nil || v.Passed() {
			continue
		}
		old := prev[n.Name]
		if d.plan.Kept[n.Name] && old != nil {
			list = append(list, *old.DeepCopy())
			continue
		}
		e := v1alpha1.NodeVerdictStatus{Node: n.Name, Verdict: v.Reason, Revision: n.Revision,
			Message: profilestatus.Truncate(v.Message), LastTransitionTime: ptr.To(metav1.NewTime(d.in.Now))}
		if old != nil && old.Verdict == v.Reason && old.LastTransitionTime != nil {
			e.LastTransitionTime = old.LastTransitionTime.DeepCopy()
		}
		list = append(list, e)
	}
	sort.SliceStable(list, func(i, j int) bool {
		ri, rj := list[i].Verdict == v1alpha1.VerdictRegressed, list[j].Verdict == v1alpha1.VerdictRegressed
		if ri != rj {
			return ri
		}
		return list[i].Node < list[j].Node
	})
	if len(list) > maxVerdicts {
		return list[:maxVerdicts], int32(len(list) - maxVerdicts)
	}
	return list, 0
}

// verdictsOnRecord indexes the previous pass's verdict list by node.
func verdictsOnRecord(last *v1alpha1.RolloutStatus) map[string]*v1alpha1.NodeVerdictStatus {
	out := map[string]*v1alpha1.NodeVerdictStatus{}
	if last == nil {
		return out
	}
	for i := range last.Verdicts {
		out[last.Verdicts[i].Node] = &last.Verdicts[i]
	}
	return out
}
