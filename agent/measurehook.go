package agent

import (
	"context"
	"sync"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/loop"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// startMeasurer starts run-queue latency and throttling measurement and
// returns the loop's hook and a stop function. The hook republishes the
// previous numbers unless the new window differs materially, so status is
// written only when the numbers moved.
func startMeasurer(ctx context.Context, root *host.Root, log logr.Logger) (loop.MeasureFunc, func()) {
	m := measure.New(root, log.WithName("measure"))
	if err := m.Start(ctx); err != nil {
		log.Error(err, "Failed to start measurement; status reports WithinBudget Unknown")
		return nil, func() {}
	}
	var mu sync.Mutex
	var published *measure.Result
	var out *loop.Measurement
	hook := func(ctx context.Context, t v1alpha1.TuningSpec, pods []podcgroup.Pod) (*loop.Measurement, error) {
		res, err := m.Collect(ctx, measure.Input{Tuning: t, Pods: pods})
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if out != nil && !measure.ChangedMaterially(published, res) {
			return out, nil
		}
		published = res
		out = &loop.Measurement{Latency: res.Latency, RunQueueP99: res.RunQueueP99, Throttling: res.Throttling,
			ThrottledRatio: res.ThrottledRatio, Findings: res.Findings, Budget: res.Budget}
		return out, nil
	}
	return hook, func() { _ = m.Close() }
}
