package apicost

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSingleWriterPartsAreAtomic checks, on the real API server with the
// committed CRD, that managedFields name each part of a LatencyNode that
// one writer alone writes (the manager's spec.tuning; the agent's
// status.kernel, latency, baseline and current) and not every field in it:
// the API server decodes, copies and re-encodes managedFields on every
// write, and listing each leaf made them 40% of a reporting node's bytes.
func TestSingleWriterPartsAreAtomic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	crd, err := LoadCRD(lnCRD)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := LoadObject("testdata/latencynode.json")
	if err != nil {
		t.Fatal(err)
	}
	// The evidence the agent carries on a node under rollout.
	st := tmpl.Object["status"].(map[string]any)
	st["baseline"] = deepCopyJSON(t, st["current"])
	srv, err := Start(assets(t), []*unstructured.Unstructured{crd})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	ctx := context.Background()
	p, err := srv.Prepare(ctx, Case{Name: "ln", Status: true, Change: Measurement,
		Object: func(i int) *unstructured.Unstructured { return Named(tmpl, "LatencyNode", "node", i) }}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Patch(ctx, p, 1, 1); err != nil {
		t.Fatal(err)
	}
	p.Change = SpecChange
	if _, err := srv.Patch(ctx, p, 1, 1); err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(p.objs[0].GroupVersionKind())
	if err := srv.Client.Get(ctx, client.ObjectKeyFromObject(p.objs[0]), got); err != nil {
		t.Fatal(err)
	}
	parts := map[string][]string{"f:spec": {"f:tuning"}, "f:status": {"f:kernel", "f:latency", "f:baseline", "f:current"}}
	for _, e := range got.GetManagedFields() {
		var fields map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			t.Fatal(err)
		}
		for top, names := range parts {
			sub, _ := fields[top].(map[string]any)
			for _, n := range names {
				if v, ok := sub[n].(map[string]any); ok && len(v) > 0 {
					t.Errorf("manager %q (%s) owns %d fields inside %s.%s; want the part as one atomic field",
						e.Manager, e.Subresource, len(v), top, n)
				}
			}
		}
	}
	mf, _ := json.Marshal(got.GetManagedFields())
	t.Logf("managedFields: %d bytes", len(mf))
}

func deepCopyJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSummarisedIRQStatusSize stores a 256-IRQ node's status on the real
// API server both ways: one line per IRQ (before issue 30) and summarised
// as the agent now reports it. The summarised object is at most a third of
// the per-IRQ one.
func TestSummarisedIRQStatusSize(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	crd, err := LoadCRD(lnCRD)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := LoadObject("testdata/latencynode.json")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Start(assets(t), []*unstructured.Unstructured{crd})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	ctx := context.Background()
	size := map[string]int{}
	for name, shape := range map[string]func(*unstructured.Unstructured){"per-irq": ManySettings, "summarised": SummarisedIRQs, "template": nil} {
		p, err := srv.Prepare(ctx, Case{Name: name, Status: true, Change: Measurement, Object: func(i int) *unstructured.Unstructured {
			u := Named(tmpl, "LatencyNode", name, i)
			if shape != nil {
				shape(u)
			}
			return u
		}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Patch(ctx, p, 1, 1); err != nil {
			t.Fatal(err)
		}
		total, mf, err := srv.ObjectBytes(ctx, p.objs[0])
		if err != nil {
			t.Fatal(err)
		}
		size[name] = total
		t.Logf("%-10s %6d B stored (managedFields %d B)", name, total, mf)
	}
	if size["summarised"]*3 > size["per-irq"] {
		t.Errorf("summarised %d B, per-IRQ %d B: want at most a third", size["summarised"], size["per-irq"])
	}
}
