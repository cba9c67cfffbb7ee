package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// nodeSource lists LatencyNodes and watches them from a resourceVersion.
type nodeSource interface {
	list(ctx context.Context) (nodes []v1alpha1.LatencyNode, resourceVersion string, err error)
	watch(ctx context.Context, resourceVersion string) (watch.Interface, error)
}

// clusterNodes are the LatencyNodes -l selects, read through the client.
type clusterNodes struct {
	c   client.WithWatch
	sel labels.Selector // nil: all
}

func (s clusterNodes) opts(raw *metav1.ListOptions) *client.ListOptions {
	o := &client.ListOptions{Raw: raw}
	if s.sel != nil && !s.sel.Empty() {
		o.LabelSelector = s.sel
	}
	return o
}

func (s clusterNodes) list(ctx context.Context) ([]v1alpha1.LatencyNode, string, error) {
	var l v1alpha1.LatencyNodeList
	if err := s.c.List(ctx, &l, s.opts(nil)); err != nil {
		return nil, "", err
	}
	return l.Items, l.ResourceVersion, nil
}

func (s clusterNodes) watch(ctx context.Context, rv string) (watch.Interface, error) {
	return s.c.Watch(ctx, &v1alpha1.LatencyNodeList{}, s.opts(&metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}))
}

// nodeView is what a watching command prints: the nodes listed first, then
// a node whose row changed (or that was deleted: its last row again, as
// kubectl get -w prints it).
type nodeView interface {
	initial(nodes []v1alpha1.LatencyNode) error
	changed(n *v1alpha1.LatencyNode, deleted bool) error
}

// retryAfter is the first wait before a watch is made again after a
// transient error (the API server restarting, a dropped connection); it
// doubles up to maxRetryAfter.
var retryAfter, maxRetryAfter = 500 * time.Millisecond, 30 * time.Second

// follow prints the nodes src lists, then what changes, until ctx ends
// (then nil: Ctrl-C is how a watch ends). A watch the server ends, or one
// that fails transiently, is made again from the last resourceVersion seen
// (events and bookmarks move it); a 410 Gone (that version is compacted
// away) relists, printing the rows that changed meanwhile and the nodes
// deleted meanwhile. Any other error ends it.
func follow(ctx context.Context, src nodeSource, v nodeView) error {
	nodes, rv, err := src.list(ctx)
	if err != nil {
		return err
	}
	if err := v.initial(nodes); err != nil {
		return err
	}
	known := map[string]*v1alpha1.LatencyNode{}
	for i := range nodes {
		known[nodes[i].Name] = &nodes[i]
	}
	wait := retryAfter
	for ctx.Err() == nil {
		if rv == "" {
			rv, err = relist(ctx, src, v, known)
		} else {
			rv, err = watchFrom(ctx, src, v, known, rv)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			wait = retryAfter
		case gone(err):
			rv = ""
		case transient(err):
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, maxRetryAfter)
		default:
			return err
		}
	}
	return nil
}

// relist lists again after a 410: every node's row that changed, every
// known node that is gone, and the list's resourceVersion to watch from.
func relist(ctx context.Context, src nodeSource, v nodeView, known map[string]*v1alpha1.LatencyNode) (string, error) {
	nodes, rv, err := src.list(ctx)
	if err != nil {
		return "", err
	}
	now := map[string]bool{}
	for i := range nodes {
		now[nodes[i].Name] = true
		known[nodes[i].Name] = &nodes[i]
		if err := v.changed(&nodes[i], false); err != nil {
			return "", err
		}
	}
	for name, n := range known {
		if !now[name] {
			delete(known, name)
			if err := v.changed(n, true); err != nil {
				return "", err
			}
		}
	}
	return rv, nil
}

// watchFrom watches from rv until the watch ends, ctx ends or an error
// event arrives, returning the last resourceVersion it saw.
func watchFrom(ctx context.Context, src nodeSource, v nodeView, known map[string]*v1alpha1.LatencyNode, rv string) (string, error) {
	w, err := src.watch(ctx, rv)
	if err != nil {
		return rv, err
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var open bool
		select {
		case <-ctx.Done():
			return rv, nil
		case ev, open = <-w.ResultChan():
		}
		if !open {
			return rv, nil // the server ended it (its timeout): resume from rv
		}
		switch ev.Type {
		case watch.Error:
			return rv, apierrors.FromObject(ev.Object)
		case watch.Bookmark:
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
				rv = m.GetResourceVersion()
			}
		case watch.Added, watch.Modified, watch.Deleted:
			n, ok := ev.Object.(*v1alpha1.LatencyNode)
			if !ok {
				return rv, fmt.Errorf("watching LatencyNodes: got a %T", ev.Object)
			}
			rv = n.ResourceVersion
			deleted := ev.Type == watch.Deleted
			if deleted {
				delete(known, n.Name)
			} else {
				known[n.Name] = n
			}
			if err := v.changed(n, deleted); err != nil {
				return rv, err
			}
		}
	}
}

// gone says the resourceVersion watched from is too old (410 Gone or
// Expired): only a new list can go on.
func gone(err error) bool {
	var s apierrors.APIStatus
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		(errors.As(err, &s) && s.Status().Code == 410)
}

// transient says an error may pass if the watch is made again: the API
// server busy, restarting or out of reach for a moment.
func transient(err error) bool {
	var ne net.Error
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne)
}

// tableView prints a watching command's table: first as without -w
// (print), then a node's rows again whenever they differ from the ones it
// last printed for that node: an update that changes nothing shown (an
// agent's heartbeat) prints nothing. Rows go through one aligned, so later
// rows line up under the table.
type tableView struct {
	a      *aligned
	print  func(nodes []v1alpha1.LatencyNode) error // the table, through a
	render func(n *v1alpha1.LatencyNode) [][]string // a node's rows; none: the command does not show it
	last   map[string]string                        // node name → its rows as last printed
}

func (t *tableView) initial(nodes []v1alpha1.LatencyNode) error {
	t.last = map[string]string{}
	for i := range nodes {
		if rows := t.render(&nodes[i]); len(rows) > 0 {
			t.last[nodes[i].Name] = fmt.Sprint(rows)
		}
	}
	return t.print(nodes)
}

func (t *tableView) changed(n *v1alpha1.LatencyNode, deleted bool) error {
	rows := t.render(n)
	if len(rows) == 0 {
		delete(t.last, n.Name)
		return nil
	}
	key := fmt.Sprint(rows)
	if prev, ok := t.last[n.Name]; ok && prev == key && !deleted {
		return nil
	}
	if deleted {
		delete(t.last, n.Name)
	} else {
		t.last[n.Name] = key
	}
	return t.a.print(rows...)
}

// objectView prints a watching command's nodes as objects (-o json, yaml,
// name, ...): each listed one, then each one again when its
// resourceVersion moves, one object at a time, as kubectl get -w -o does.
type objectView struct {
	out  io.Writer
	o    *output
	show func(n *v1alpha1.LatencyNode) bool
	last map[string]string // node name → resourceVersion printed
}

func (v *objectView) initial(nodes []v1alpha1.LatencyNode) error {
	v.last = map[string]string{}
	for i := range nodes {
		if err := v.changed(&nodes[i], false); err != nil {
			return err
		}
	}
	return nil
}

func (v *objectView) changed(n *v1alpha1.LatencyNode, deleted bool) error {
	if !v.show(n) {
		return nil
	}
	if prev, ok := v.last[n.Name]; ok && prev == n.ResourceVersion && !deleted {
		return nil
	}
	if deleted {
		delete(v.last, n.Name)
	} else {
		v.last[n.Name] = n.ResourceVersion
	}
	obj := n.DeepCopy()
	obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("LatencyNode"))
	return v.o.printObject(v.out, obj)
}
