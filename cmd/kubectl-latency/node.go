package main

import (
	"context"
	"fmt"
	"io"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// printNode prints the LatencyNode named with the printer -o names.
func printNode(ctx context.Context, c client.Client, out io.Writer, o *output, name string) error {
	var n v1alpha1.LatencyNode
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return err
	}
	return o.printObject(out, &n)
}

// evidence is one window of a node's before/after evidence for a person:
// "p99 300µs (p50 15µs, max 3ms, 60000 samples) under Baseline -, window
// 30s ending 2026-01-01T00:00:00Z; pods p99 1ms (900 samples), throttled
// 0.2", every value the window lacks as "-".
func evidence(e *v1alpha1.LatencyEvidence) string {
	at := "-"
	if !e.MeasuredAt.IsZero() {
		at = e.MeasuredAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	s := fmt.Sprintf("p99 %s (p50 %s, max %s, %s samples) under %s %s, window %s ending %s",
		dur(e.RunQueue.P99), dur(e.RunQueue.P50), dur(e.RunQueue.Max), count(e.RunQueue.Samples),
		orDash(string(e.Action)), orDash(e.Revision), dur(e.Window), at)
	pods := "pods p99 -"
	if p := e.Pods; p != nil {
		pods = fmt.Sprintf("pods p99 %s (%s samples)", dur(p.P99), count(p.Samples))
	}
	return safe(s + "; " + pods + ", throttled " + orDash(e.ThrottledRatio))
}

// count is a sample count, "-" for none.
func count(n int64) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprint(n)
}
