package controllers

import (
	"sync"
	"time"

	"latencytier.io/latencytier/api/v1alpha1"
)

// ownWrites remembers, per LatencyNode, the generation the node controller
// last wrote (a create is generation 1), until its cache has caught up.
// A node is reconciled again by every event of it: at 1000 nodes an agent's
// status report still in flight from before the spec write brought a
// quarter of the nodes of a profile change back before the cache held the
// write, and each of those sent a spec patch from the older object that
// the API server refused (the generation test) and retried 200 ms later.
// While the cache is behind the manager's own write, the reconcile waits
// for that write's event instead.
type ownWrites struct {
	mu sync.Mutex
	m  map[string]ownWrite
}

type ownWrite struct {
	generation int64
	at         time.Time
}

// ownWriteTimeout bounds how long a write is waited for: a LatencyNode
// deleted by someone else right after the write never shows that
// generation, and its node must not wait forever.
const ownWriteTimeout = 10 * time.Second

// wrote records that the LatencyNode name was written at generation.
func (w *ownWrites) wrote(name string, generation int64, now time.Time) {
	if generation == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]ownWrite{}
	}
	w.m[name] = ownWrite{generation: generation, at: now}
}

// behind reports whether cached (nil: the cache has none) is older than
// the last write of name, and forgets a write the cache has caught up with
// or that is older than ownWriteTimeout.
func (w *ownWrites) behind(name string, cached *v1alpha1.LatencyNode, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[name]
	if !ok {
		return false
	}
	if (cached != nil && cached.Generation >= e.generation) || now.Sub(e.at) > ownWriteTimeout {
		delete(w.m, name)
		return false
	}
	return true
}

// forget drops name (its LatencyNode was deleted).
func (w *ownWrites) forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, name)
}
