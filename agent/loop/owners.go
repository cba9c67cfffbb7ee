package loop

import (
	"context"
	"errors"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/owners"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/snapshot"
)

// placer is a RuntimeHook that also tells which containers the runtime
// handed it already placed (the NRI plugin).
type placer interface {
	Placements() []owners.Placement
}

// owners reads the node's other writers for this pass: the pass's pods,
// the hook's placements, the cgroups the journal says are the agent's.
// The writers found are logged when they change; what it could not read
// once per distinct failure.
func (r *Reconciler) owners(ctx context.Context, node snapshot.Node, pods []podcgroup.Pod) owners.Set {
	in := owners.Input{Pods: pods, Isolated: node.CPUs.Isolated, Ours: r.journaled()}
	if p, ok := r.Hook.(placer); ok {
		in.Placements = p.Placements()
	}
	set := owners.Detect(r.Root, in)
	names := make([]string, len(set.Running))
	for i, o := range set.Running {
		names[i] = o.Name
	}
	if seen := strings.Join(names, ", "); seen != r.ownersSeen {
		ctrl.LoggerFrom(ctx).Info("The node's other writers changed; the settings they own are left to them", "writers", seen)
		r.ownersSeen = seen
	}
	if err := errors.Join(set.Errs...); err != nil && err.Error() != r.ownersFailure {
		ctrl.LoggerFrom(ctx).Error(err, "Could not read all of the node's other writers; what was not read claims nothing")
		r.ownersFailure = err.Error()
	} else if err == nil {
		r.ownersFailure = ""
	}
	return set
}

// journaled reports whether the agent's journal holds a file at path: a
// value the agent wrote, not another writer's.
func (r *Reconciler) journaled() func(path string) bool {
	j, err := journal.Load(r.Root)
	if err != nil || j == nil {
		return nil
	}
	paths := make(map[string]bool, len(j.Entries))
	for _, en := range j.Entries {
		paths[r.Root.Confine(en.Path)] = true
	}
	return func(path string) bool { return paths[path] }
}
