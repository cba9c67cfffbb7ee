package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

const benchNodes = 500

// BenchmarkApply500Nodes measures, against the real API server, how long a
// new profile takes from creation to every one of 500 nodes labelled with a
// LatencyNode applying it, and how many API writes the manager then makes
// over three informer resyncs of that steady state (goal: zero).
//
//	go test ./controllers -run '^$' -bench Apply500Nodes -benchtime 1x
func BenchmarkApply500Nodes(b *testing.B) {
	needSuite(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sel := fmt.Sprintf("bench-%d", i)
		names := make([]string, benchNodes)
		for j := range names {
			names[j] = fmt.Sprintf("%s-n%03d", sel, j)
			createNode(b, names[j], map[string]string{"tier": sel})
		}
		settle(b)
		w0 := writes.Load()
		b.StartTimer()

		start := time.Now()
		createProfile(b, sel, 0, map[string]string{"tier": sel})
		waitAllApplied(b, ctx, sel)
		elapsed := time.Since(start)

		b.StopTimer()
		applyWrites := writes.Load() - w0
		settle(b)
		w1, r1 := writes.Load(), reads.Load()
		waitForReconciles(b, 3, names, []string{sel})
		steadyWrites, steadyReads := writes.Load()-w1, reads.Load()-r1
		b.ReportMetric(elapsed.Seconds(), "s-to-all-applied")
		b.ReportMetric(float64(applyWrites), "writes-to-apply")
		b.ReportMetric(float64(steadyWrites)/3, "writes/resync")
		b.ReportMetric(float64(steadyReads)/3, "cache-reads/resync")
		teardownBench(b, ctx, sel, names)
		b.StartTimer()
	}
}

// waitAllApplied polls the API server (not the cache) until every node of
// the selector has the label and a LatencyNode applying profile sel.
func waitAllApplied(b *testing.B, ctx context.Context, sel string) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		var nodes corev1.NodeList
		var lns v1alpha1.LatencyNodeList
		if err := k8s.List(ctx, &nodes, client.MatchingLabels{"tier": sel, v1alpha1.ProfileLabel: sel}); err != nil {
			b.Fatal(err)
		}
		if err := k8s.List(ctx, &lns); err != nil {
			b.Fatal(err)
		}
		applying := 0
		for _, ln := range lns.Items {
			if ln.Spec.Profile == sel && ln.Spec.Action == v1alpha1.ActionApply {
				applying++
			}
		}
		if len(nodes.Items) == benchNodes && applying == benchNodes {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("500 nodes not applied within 5 minutes")
}

func teardownBench(b *testing.B, ctx context.Context, sel string, names []string) {
	for _, n := range names {
		if err := k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); client.IgnoreNotFound(err) != nil {
			b.Fatal(err)
		}
	}
	if err := k8s.Delete(ctx, &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: sel}}); err != nil {
		b.Fatal(err)
	}
	eventually(b, "bench profile gone", func() error { return gone(&v1alpha1.LatencyProfile{}, sel) })
}
