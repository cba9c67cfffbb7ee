package controllers

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

// ownedLabelKeys returns the label keys the controller recorded as set by it
// in the node's owned-labels annotation.
func ownedLabelKeys(annotations map[string]string) []string {
	raw := annotations[v1alpha1.OwnedLabelsAnnotation]
	if raw == "" {
		return nil
	}
	var keys []string
	for _, k := range strings.Split(raw, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// labelPatch computes the JSON merge patch that gives a node the profile
// label for profile want ("" means no profile). It touches only the profile
// label and the owned-labels annotation, and removes only labels recorded as
// owned. A profile label the controller did not set is never changed:
// foreign is then true and the patch leaves it alone. A nil patch means the
// node already is as wanted.
func labelPatch(node *corev1.Node, want string) (patch map[string]any, foreign bool) {
	owned := ownedLabelKeys(node.Annotations)
	isOwned := contains(owned, v1alpha1.ProfileLabel)
	current, present := node.Labels[v1alpha1.ProfileLabel]
	if present && !isOwned {
		return nil, true
	}
	if want == "" {
		return removeOwnedPatch(node, owned), false
	}
	if present && current == want && isOwned {
		return nil, false
	}
	return metadataPatch(
		map[string]any{v1alpha1.ProfileLabel: want},
		ownedAnnotation(append(owned, v1alpha1.ProfileLabel)),
	), false
}

// removeOwnedPatch removes the profile label, when it is recorded as owned,
// and the owned-labels annotation. The annotation is only a record: anyone
// can edit it, so a key in it that the controller never sets (every key but
// the profile label) is not taken as licence to remove that label.
func removeOwnedPatch(node *corev1.Node, owned []string) map[string]any {
	if !contains(owned, v1alpha1.ProfileLabel) {
		return nil
	}
	lbls := map[string]any{}
	if _, ok := node.Labels[v1alpha1.ProfileLabel]; ok {
		lbls[v1alpha1.ProfileLabel] = nil
	}
	return metadataPatch(lbls, nil)
}

// metadataPatch builds {"metadata":{"labels":...,"annotations":{owned}}};
// a nil ownedValue deletes the owned-labels annotation.
func metadataPatch(lbls map[string]any, ownedValue any) map[string]any {
	meta := map[string]any{
		"annotations": map[string]any{v1alpha1.OwnedLabelsAnnotation: ownedValue},
	}
	if len(lbls) > 0 {
		meta["labels"] = lbls
	}
	return map[string]any{"metadata": meta}
}

// ownedAnnotation is the annotation value recording keys, sorted and unique.
func ownedAnnotation(keys []string) string {
	set := map[string]struct{}{}
	for _, k := range keys {
		set[k] = struct{}{}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// withAgentLabel adds to patch (nil: none yet) what gives the node the
// agent label want ("" removes it), and returns nil when neither changes
// anything. Unlike the profile label the agent label is the manager's
// alone (the latencytier-agent-label admission policy refuses it to
// everyone else), so a value it did not set is overwritten, or removed: a
// label left from before the policy must not keep attracting the agent.
func withAgentLabel(patch map[string]any, node *corev1.Node, want string) map[string]any {
	current, present := node.Labels[v1alpha1.AgentLabel]
	if present == (want != "") && current == want {
		return patch
	}
	var value any = want
	if want == "" {
		value = nil
	}
	if patch == nil {
		patch = map[string]any{"metadata": map[string]any{}}
	}
	meta := patch["metadata"].(map[string]any)
	lbls, _ := meta["labels"].(map[string]any)
	if lbls == nil {
		lbls = map[string]any{}
		meta["labels"] = lbls
	}
	lbls[v1alpha1.AgentLabel] = value
	return patch
}

// agentVariant is the agent DaemonSet a node needs (v1alpha1.AgentLabel):
// hostPID while the profile that owns it grants realtime, while its
// LatencyNode still tells the agent to apply or revert real-time policies,
// and while the agent reports threads it has not restored; the standard
// agent on any other node a profile owns or that still has a LatencyNode
// (its revert needs an agent); none elsewhere. The hostPID agent is given
// up only after the threads are restored: restoring calls sched_setattr too.
func agentVariant(owner *v1alpha1.LatencyProfile, ln *v1alpha1.LatencyNode) string {
	switch {
	case owner != nil && owner.Spec.Realtime != nil,
		ln != nil && (ln.Spec.Tuning.Realtime != nil || holdsThreads(ln)):
		return v1alpha1.AgentHostPID
	case owner != nil || ln != nil:
		return v1alpha1.AgentStandard
	}
	return ""
}

// holdsThreads reports whether the node's agent still holds thread policies
// it set and has not restored (status.heldThreads, counted from its
// journal). The settings list is capped (256) and a tenant's Refused
// entries can fill it, so it only adds to the count: an agent that
// predates heldThreads still reports threads there (Applied, or Failed
// restores).
func holdsThreads(ln *v1alpha1.LatencyNode) bool {
	if ln.Status.HeldThreads > 0 {
		return true
	}
	for _, s := range ln.Status.Settings {
		if settingid.IsThread(s.Setting) &&
			(s.State == v1alpha1.SettingApplied || s.State == v1alpha1.SettingFailed) {
			return true
		}
	}
	return false
}
