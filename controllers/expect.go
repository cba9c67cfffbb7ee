package controllers

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// ownWrites remembers, per LatencyNode, the generation the selection
// last wrote (a create is generation 1), until its cache has caught up.
// A node is reconciled again by every event of it: at 1000 nodes an agent's
// status report still in flight from before the spec write brought a
// quarter of the nodes of a profile change back before the cache held the
// write, and each of those sent a spec patch from the older object that
// the API server refused (the generation test) and retried 200 ms later.
// While the cache is behind the manager's own write, the reconcile waits
// for that write's event instead.
type ownWrites struct {
	// spec is the generation of each LatencyNode's last spec write.
	spec writeLog
	mu   sync.Mutex
	// labels are the node label values the selection last patched
	// (nil: removed), per node, until its Node cache shows them. The
	// create of a LatencyNode follows its node's label patch and its
	// event can come back before the Node's: at 300 nodes 1% of a
	// create's Node patches were sent twice, the second from a cached
	// Node without the labels just written.
	labels map[string]labelWrite
}

type labelWrite struct {
	values map[string]*string
	at     time.Time
}

// ownWriteTimeout bounds how long a write is waited for: a LatencyNode
// deleted by someone else right after the write never shows that
// generation, and its node must not wait forever.
const ownWriteTimeout = 10 * time.Second

// wrote records that the LatencyNode name was written at generation.
func (w *ownWrites) wrote(name string, generation int64, now time.Time) {
	if generation != 0 {
		w.spec.record(name, generation, "", now)
	}
}

// behind reports whether cached (nil: the cache has none) is older than
// the last write of name, and forgets a write the cache has caught up with
// or that is older than ownWriteTimeout.
func (w *ownWrites) behind(name string, cached *v1alpha1.LatencyNode, now time.Time) bool {
	if cached == nil {
		return w.spec.behind(name, 0, false, now, ownWriteTimeout)
	}
	return w.spec.behind(name, cached.Generation, true, now, ownWriteTimeout)
}

// forget drops name (its LatencyNode was deleted).
func (w *ownWrites) forget(name string) { w.spec.forget(name) }

// wroteLabels records that node name was patched to the label values
// (nil: the label removed).
func (w *ownWrites) wroteLabels(name string, values map[string]*string, now time.Time) {
	if len(values) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.labels == nil {
		w.labels = map[string]labelWrite{}
	}
	w.labels[name] = labelWrite{values: values, at: now}
}

// labelsBehind reports whether the cached node does not show yet the
// labels last patched onto it, and forgets a patch it shows or that is
// older than ownWriteTimeout (someone else changed the labels since).
func (w *ownWrites) labelsBehind(node *corev1.Node, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.labels[node.Name]
	if !ok {
		return false
	}
	if now.Sub(e.at) > ownWriteTimeout || showsLabels(node, e.values) {
		delete(w.labels, node.Name)
		return false
	}
	return true
}

func showsLabels(node *corev1.Node, values map[string]*string) bool {
	for k, want := range values {
		got, present := node.Labels[k]
		if present != (want != nil) || (want != nil && got != *want) {
			return false
		}
	}
	return true
}

// forgetLabels drops name's label patch (its Node was deleted).
func (w *ownWrites) forgetLabels(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.labels, name)
}

// patchedLabels are the label values a metadata patch (labelPatch,
// withAgentLabel) sets: nil for a label it removes.
func patchedLabels(patch map[string]any) map[string]*string {
	meta, _ := patch["metadata"].(map[string]any)
	lbls, _ := meta["labels"].(map[string]any)
	out := make(map[string]*string, len(lbls))
	for k, v := range lbls {
		if s, ok := v.(string); ok {
			out[k] = &s
		} else {
			out[k] = nil
		}
	}
	return out
}
