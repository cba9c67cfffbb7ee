package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"latencytier.io/latencytier/api/v1alpha1"
)

// scriptedNodes is a nodeSource that plays a script: each list returns the
// next listing, each watch the next step (a watcher preloaded with events,
// or an error), recording the resourceVersion each watch was asked from.
// After the script it cancels the watch's context, as Ctrl-C would.
type scriptedNodes struct {
	t        *testing.T
	lists    []listing
	watches  []step
	cancel   context.CancelFunc
	askedRVs []string
}

type listing struct {
	nodes []v1alpha1.LatencyNode
	rv    string
}

type step struct {
	events []watch.Event
	err    error
	end    bool // the server ends the watch after its events
}

func (s *scriptedNodes) list(context.Context) ([]v1alpha1.LatencyNode, string, error) {
	if len(s.lists) == 0 {
		s.t.Fatal("listed more often than the script says")
	}
	l := s.lists[0]
	s.lists = s.lists[1:]
	return l.nodes, l.rv, nil
}

func (s *scriptedNodes) watch(_ context.Context, rv string) (watch.Interface, error) {
	s.askedRVs = append(s.askedRVs, rv)
	if len(s.watches) == 0 {
		s.cancel()
		return watch.NewFake(), nil
	}
	st := s.watches[0]
	s.watches = s.watches[1:]
	if st.err != nil {
		return nil, st.err
	}
	w := watch.NewFakeWithChanSize(len(st.events), false)
	for _, ev := range st.events {
		w.Action(ev.Type, ev.Object)
	}
	if st.end {
		w.Stop()
	}
	return w, nil
}

func node(name, rv, p99 string) v1alpha1.LatencyNode {
	n := v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	n.Status.ThrottledRatio = p99 // what the test's table shows
	return n
}

func event(t watch.EventType, n v1alpha1.LatencyNode) watch.Event {
	return watch.Event{Type: t, Object: &n}
}

// rowView is a tableView printing "NAME VALUE" per node.
func rowView(out *bytes.Buffer) *tableView {
	a := &aligned{out: out}
	render := func(n *v1alpha1.LatencyNode) [][]string {
		return [][]string{{n.Name, n.Status.ThrottledRatio}}
	}
	return &tableView{a: a, render: render, print: func(nodes []v1alpha1.LatencyNode) error {
		rows := [][]string{{"NAME", "VALUE"}}
		for i := range nodes {
			rows = append(rows, render(&nodes[i])...)
		}
		return a.print(rows...)
	}}
}

// TestFollowResumesAndRelistsOnGone: after the first list, follow prints
// only rows that changed (an update that changes nothing shown prints
// nothing); a watch the server ends resumes from the last resourceVersion
// it saw, a bookmark's included; a transient error makes the watch again
// from the same version; a 410 Gone relists and prints what changed
// meanwhile, a node deleted meanwhile included; Ctrl-C ends it with no
// error.
func TestFollowResumesAndRelistsOnGone(t *testing.T) {
	old := retryAfter
	retryAfter = time.Millisecond
	t.Cleanup(func() { retryAfter = old })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	expired := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 10 (15)"}}
	src := &scriptedNodes{t: t, cancel: cancel,
		lists: []listing{
			{[]v1alpha1.LatencyNode{node("a", "5", "1"), node("b", "6", "1")}, "10"},
			// After the 410: a unchanged since its last row, b gone, c new.
			{[]v1alpha1.LatencyNode{node("a", "30", "2"), node("c", "31", "1")}, "40"},
		},
		watches: []step{
			{events: []watch.Event{
				event(watch.Modified, node("a", "11", "1")), // heartbeat: same row
				event(watch.Modified, node("a", "12", "2")),
				{Type: watch.Bookmark, Object: &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "14"}}},
			}, end: true},
			{err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED)},
			{events: []watch.Event{{Type: watch.Error, Object: &expired.ErrStatus}}},
			{events: []watch.Event{event(watch.Deleted, node("c", "41", "1"))}, end: true},
		},
	}
	var out bytes.Buffer
	if err := follow(ctx, src, rowView(&out)); err != nil {
		t.Fatalf("follow: %v", err)
	}
	want := "NAME  VALUE\na     1\nb     1\n" + // the list
		"a     2\n" + // changed; the heartbeat before it printed nothing
		"c     1\nb     1\n" + // the relist: c new, b deleted meanwhile (a's row had not changed)
		"c     1\n" // deleted
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
	if got, want := strings.Join(src.askedRVs, " "), "10 14 14 40 41"; got != want {
		t.Errorf("watched from %s; want %s (the list; the bookmark, after the server ended the watch; the same again after the refused connection, which then got the 410; the relist; the deletion)", got, want)
	}
}

// TestFollowStopsOnAnErrorThatStays: an error a retry cannot mend (the
// user may not watch) ends follow with it.
func TestFollowStopsOnAnErrorThatStays(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "tuning.latencytier.io", Resource: "latencynodes"}, "", errors.New("no"))
	src := &scriptedNodes{t: t, cancel: func() {}, lists: []listing{{nil, "1"}}, watches: []step{{err: forbidden}}}
	var out bytes.Buffer
	if err := follow(context.Background(), src, rowView(&out)); !apierrors.IsForbidden(err) {
		t.Errorf("follow: %v, want the Forbidden error", err)
	}
}

// syncBuffer is a bytes.Buffer safe to read while a watch writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
