package controllers

import (
	"sync"
	"time"
)

// writeLog remembers, per object name, the manager's last write of that
// object: the generation and resourceVersion the API server gave it, and
// when. It is the one record of the manager's own writes, for both things
// a controller asks of it:
//   - behind: the cache has not shown the write yet (its generation), so a
//     reconcile from the cache would act on an object older than what it
//     wrote itself (the selection's spec writes, ownWrites);
//   - echo: an event carries exactly that write (its resourceVersion), so
//     it reports nothing new (the profile status writes, statusGate).
//
// resourceVersions are compared for equality only, never ordered (they are
// opaque); generations only grow.
type writeLog struct {
	mu sync.Mutex
	m  map[string]writeMark
}

type writeMark struct {
	generation      int64
	resourceVersion string
	at              time.Time
}

// record notes that the manager's write of name gave it generation and
// resourceVersion (either may be unknown: 0, "").
func (l *writeLog) record(name string, generation int64, resourceVersion string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]writeMark{}
	}
	l.m[name] = writeMark{generation: generation, resourceVersion: resourceVersion, at: now}
}

// behind reports whether the cache, holding generation cached of name
// (present false: it holds none), has not caught up with the last write
// recorded with a generation. It forgets a write the cache has caught up
// with or that is older than timeout (the object deleted by someone else
// right after the write never shows it).
func (l *writeLog) behind(name string, cached int64, present bool, now time.Time, timeout time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.m[name]
	if !ok || w.generation == 0 {
		return false
	}
	if (present && cached >= w.generation) || now.Sub(w.at) > timeout {
		delete(l.m, name)
		return false
	}
	return true
}

// echo reports whether resourceVersion is the one the last recorded write
// of name gave it: the event is that write coming back.
func (l *writeLog) echo(name, resourceVersion string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return resourceVersion != "" && l.m[name].resourceVersion == resourceVersion
}

// forget drops name (the object was deleted).
func (l *writeLog) forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, name)
}
