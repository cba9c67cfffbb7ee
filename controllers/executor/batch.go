package executor

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Workers bounds the writes the executor has in flight for one caller:
// a profile's pass writes this many of its nodes' selections at once
// (ForEachNode, one node's writes each), and a pass's batch of writes
// (WriteSpecs, SetTaints) goes out this many at a time. A write mostly waits on the API server: with 4
// node workers a 300-node change went out at ~23 writes/s on a loaded
// 2-core machine.
const Workers = 16

// each runs write(i) for every i below n, at most Workers at once, and
// returns each one's error by index.
func each(ctx context.Context, n int, write func(ctx context.Context, i int) error) []error {
	errs := make([]error, n)
	if n == 1 {
		errs[0] = write(ctx, 0)
		return errs
	}
	slots := make(chan struct{}, Workers)
	var wg sync.WaitGroup
	for i := range n {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			errs[i] = write(ctx, i)
		}()
	}
	wg.Wait()
	return errs
}

// ForEachNode runs write(ctx, i) for every node i below n, one node's
// writes each (a node's labels, then its LatencyNode), at most Workers
// nodes at once: a profile's pass over its nodes' selection. It returns
// each one's error by index.
func ForEachNode(ctx context.Context, n int, write func(ctx context.Context, i int) error) []error {
	return each(ctx, n, write)
}

// firstError is the first error by index, as a loop of the writes in
// order would have stopped at, and which writes went through.
func firstError(errs []error) ([]bool, error) {
	ok := make([]bool, len(errs))
	var first error
	for i, err := range errs {
		ok[i] = err == nil
		if err != nil && first == nil {
			first = err
		}
	}
	return ok, first
}

// NodeSpec is one write of a pass's batch of LatencyNode specs: LN as
// read, and the write.
type NodeSpec struct {
	LN    *v1alpha1.LatencyNode
	Write SpecWrite
}

// WriteSpecs writes a pass's batch of LatencyNode specs through
// WriteLatencyNodeSpec, at most Workers at once (each to its own
// LatencyNode, so their order does not matter). It reports which were
// written and the first error in the batch's order; the others are still
// written, as the next pass would write them again.
func (e *Executor) WriteSpecs(ctx context.Context, writes []NodeSpec) ([]bool, error) {
	return firstError(each(ctx, len(writes), func(ctx context.Context, i int) error {
		_, err := e.WriteLatencyNodeSpec(ctx, writes[i].LN, writes[i].Write)
		return err
	}))
}

// SetTaints adds (want) or removes t on each of nodes through SetNodeTaint,
// at most Workers at once. It reports which nodes it wrote and the first
// error in the nodes' order.
func (e *Executor) SetTaints(ctx context.Context, nodes []*corev1.Node, t corev1.Taint, want bool) ([]bool, error) {
	wrote := make([]bool, len(nodes))
	_, err := firstError(each(ctx, len(nodes), func(ctx context.Context, i int) error {
		var err error
		wrote[i], err = e.SetNodeTaint(ctx, nodes[i], t, want)
		return err
	}))
	return wrote, err
}
