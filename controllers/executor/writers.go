package executor

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner names the manager in managedFields and, as its user agent,
// in the API server's audit log and metrics; the agent is
// latencytier-agent. Each writer below adds its role.
const FieldOwner = "latencytier-manager"

// Executor carries out the manager's writes.
type Executor struct {
	// Client writes (and lists, for the drain's evictions).
	Client client.Client
	// Live reads past the cache: a Node afresh after a conflicting taint
	// write, the pods of a node to drain (the manager keeps no pod
	// informer). Nil: Client reads them.
	Live client.Reader
}

// live is where the executor reads past the cache.
func (e *Executor) live() client.Reader {
	if e.Live == nil {
		return e.Client
	}
	return e.Live
}

// New is an Executor writing through c and reading afresh through live.
func New(c client.Client, live client.Reader) *Executor {
	return &Executor{Client: c, Live: live}
}

// The manager's writers (issue 42): each field the manager writes has one
// function that writes it, and each of those names itself as its own field
// manager, so `kubectl get -o yaml --show-managed-fields` tells them apart
// and a second writer of a field shows as a second manager
// (TestEachFieldHasOneManager). The table in docs/architecture.md ("Who
// writes which field") lists them, and that test checks it.
const (
	// ManagerLatencyNode creates LatencyNodes and writes their spec
	// (tuning, action, revision, verifyAfter, the reboot record) and
	// revision-set-at annotation: WriteLatencyNodeSpec.
	ManagerLatencyNode = FieldOwner + "/latencynode"
	// ManagerNodeLabels writes our labels and annotations of a Node and
	// our taints (a Node's taints are one atomic list, so both taints and
	// the labels they go with at selection share it): patchNode.
	ManagerNodeLabels = FieldOwner + "/node-labels-taints"
	// ManagerCordon writes a Node's spec.unschedulable and the cordon
	// marker annotation: patchCordon.
	ManagerCordon = FieldOwner + "/cordon"
	// ManagerProfileStatus writes a LatencyProfile's status, once a pass:
	// WriteProfileStatus.
	ManagerProfileStatus = FieldOwner + "/profile-status"
	// ManagerProfileFinalizer adds and removes the revert finalizer.
	ManagerProfileFinalizer = FieldOwner + "/profile-finalizer"
	// ManagerRevisions writes the ControllerRevisions of the rollout.
	ManagerRevisions = FieldOwner + "/revisions"
)

// FieldManagers are the manager's field managers, every one.
var FieldManagers = []string{ManagerLatencyNode, ManagerNodeLabels, ManagerCordon, ManagerProfileStatus,
	ManagerProfileFinalizer, ManagerRevisions}

// PatchNode is the one writer of our labels, our annotations (owned
// labels, hostPID) and our taints of a Node: a merge patch of those keys
// (and, for taints, the whole list with the resourceVersion it was
// computed from). A nil patch writes nothing.
func (e *Executor) PatchNode(ctx context.Context, node *corev1.Node, patch map[string]any) error {
	if patch == nil {
		return nil
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encoding node patch: %w", err)
	}
	return e.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, data), client.FieldOwner(ManagerNodeLabels))
}

// patchCordon is the one writer of a Node's cordon: spec.unschedulable and
// the manager's marker annotation (cordonPatch, uncordonPatch), for the
// managed reboots and for the release of a node they had cordoned.
func (e *Executor) patchCordon(ctx context.Context, name string, patch map[string]any) error {
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	patched := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err = e.Client.Patch(ctx, patched, client.RawPatch(types.MergePatchType, raw), client.FieldOwner(ManagerCordon))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("cordoning node %s (%v): %w", name, patch["spec"], err)
	}
	return nil
}
