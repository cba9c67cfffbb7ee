package rollout

import (
	"fmt"
	"sort"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
)

// The forward half of the rollout decision: which waiting nodes move next.

// advance moves the next ready nodes: canaries first, never more than
// maxInFlight unverified at once.
func (d *decider) advance() {
	total := len(d.in.Nodes)
	if d.countClass(planner.ClassPassed) == total || (d.completed() && d.countClass(planner.ClassWaiting) == 0) {
		d.setPhase(v1alpha1.RolloutComplete, fmt.Sprintf("%d node(s) hold %s and passed", total, d.in.Target))
		return
	}
	canaries := d.canaries()
	stage, pool := v1alpha1.RolloutProgressing, d.in.Nodes
	if !d.completed() && d.pending(canaries) {
		stage, pool = v1alpha1.RolloutCanary, canaries
	}
	slots := Scaled(d.in.Policy.MaxInFlight, total, 1) - d.countClass(planner.ClassVerifying)
	if d.completed() {
		slots = total // late joiners take the revision at once
	}
	var moved, unready []string
	for _, n := range pool {
		if d.class[n.Name] != planner.ClassWaiting {
			continue
		}
		if !d.baselineReady(&n) {
			unready = append(unready, n.Name)
			continue
		}
		if len(moved) < slots {
			moved = append(moved, n.Name)
			d.plan.Moves = append(d.plan.Moves, Move{n.Name, v1alpha1.ActionApply, d.in.Target})
		}
	}
	d.describe(stage, moved, unready)
}

func (d *decider) describe(stage v1alpha1.RolloutPhase, moved, unready []string) {
	verifying := d.countClass(planner.ClassVerifying) + len(moved)
	switch {
	case d.completed():
		d.setPhase(v1alpha1.RolloutComplete, fmt.Sprintf("%d node(s) joined and took %s", len(moved), d.in.Target))
	case verifying == 0 && len(unready) > 0:
		d.setPhase(v1alpha1.RolloutBaselining, "measuring the baseline of "+planner.Names(unready))
	default:
		msg := fmt.Sprintf("%d node(s) verifying %s", verifying, d.in.Target)
		if len(moved) > 0 {
			msg += "; changed " + planner.Names(moved)
		}
		d.setPhase(stage, msg)
	}
}

// canaries are the nodes that go first: those matching the selector, or
// the first N (nodes already on the target first, then by name).
func (d *decider) canaries() []Node {
	c := d.in.Policy.Canary
	if c == nil {
		return nil
	}
	if c.Selector != nil {
		var out []Node
		for _, n := range d.in.Nodes {
			if n.Canary {
				out = append(out, n)
			}
		}
		return out
	}
	nodes := append([]Node(nil), d.in.Nodes...)
	sort.SliceStable(nodes, func(i, j int) bool {
		return d.class[nodes[i].Name] != planner.ClassWaiting && d.class[nodes[j].Name] == planner.ClassWaiting
	})
	n := Scaled(c.Nodes, len(nodes), 1)
	if n > len(nodes) {
		n = len(nodes)
	}
	return nodes[:n]
}

// pending reports whether a canary has not passed yet.
func (d *decider) pending(canaries []Node) bool {
	for _, n := range canaries {
		if d.class[n.Name] != planner.ClassPassed {
			return true
		}
	}
	return false
}

// baselineReady: the node has a full window under what it holds now, or
// waited inconclusiveTimeout for one (then it goes without). A joining
// node is never ready: it has no LatencyNode to move yet.
func (d *decider) baselineReady(n *Node) bool {
	if n.Joining {
		return false
	}
	c := n.Current
	if c != nil && c.Action == n.Action && c.Revision == n.Revision {
		return true
	}
	deadline := n.SetAt.Add(timeout(d.in.Policy))
	if d.in.Now.Before(deadline) {
		d.wake(deadline)
		return false
	}
	return true
}
