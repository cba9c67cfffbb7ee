package controllers

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The manager's writers (issue 42): each field the manager writes has one
// function that writes it, and each of those names itself as its own field
// manager, so `kubectl get -o yaml --show-managed-fields` tells them apart
// and a second writer of a field shows as a second manager
// (TestEachFieldHasOneManager). The table in docs/architecture.md ("Who
// writes which field") lists them, and that test checks it.
const (
	// managerLatencyNode creates LatencyNodes and writes their spec
	// (tuning, action, revision, verifyAfter, the reboot record) and
	// revision-set-at annotation: writeLatencyNodeSpec.
	managerLatencyNode = fieldOwner + "/latencynode"
	// managerNodeLabels writes our labels and annotations of a Node and
	// our taints (a Node's taints are one atomic list, so both taints and
	// the labels they go with at selection share it): patchNode.
	managerNodeLabels = fieldOwner + "/node-labels-taints"
	// managerCordon writes a Node's spec.unschedulable and the cordon
	// marker annotation: patchCordon.
	managerCordon = fieldOwner + "/cordon"
	// managerProfileStatus writes a LatencyProfile's status, once a pass:
	// writeProfileStatus.
	managerProfileStatus = fieldOwner + "/profile-status"
	// managerProfileFinalizer adds and removes the revert finalizer.
	managerProfileFinalizer = fieldOwner + "/profile-finalizer"
	// managerRevisions writes the ControllerRevisions of the rollout.
	managerRevisions = fieldOwner + "/revisions"
)

// fieldManagers are the manager's field managers, every one.
var fieldManagers = []string{managerLatencyNode, managerNodeLabels, managerCordon, managerProfileStatus,
	managerProfileFinalizer, managerRevisions}

// patchNode is the one writer of our labels, our annotations (owned
// labels, hostPID) and our taints of a Node: a merge patch of those keys
// (and, for taints, the whole list with the resourceVersion it was
// computed from). A nil patch writes nothing.
func patchNode(ctx context.Context, c client.Client, node *corev1.Node, patch map[string]any) error {
	if patch == nil {
		return nil
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encoding node patch: %w", err)
	}
	return c.Patch(ctx, node, client.RawPatch(types.MergePatchType, data), client.FieldOwner(managerNodeLabels))
}

// patchCordon is the one writer of a Node's cordon: spec.unschedulable and
// the manager's marker annotation (cordonPatch, uncordonPatch), for the
// managed reboots and for the release of a node they had cordoned.
func patchCordon(ctx context.Context, c client.Client, name string, patch map[string]any) error {
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	patched := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	err = c.Patch(ctx, patched, client.RawPatch(types.MergePatchType, raw), client.FieldOwner(managerCordon))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("cordoning node %s (%v): %w", name, patch["spec"], err)
	}
	return nil
}
