package apicost

import (
	"context"
	"encoding/json"
	"fmt"
	"latencytier.io/latencytier/internal/testassets"
	"os"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func assets(tb testing.TB) string { return testassets.Dir(tb) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

const lnCRD = "../../../config/crd/bases/tuning.latencytier.io_latencynodes.yaml"

// bench is one API server with the LatencyNode CRD as committed, the same
// CRD without its CEL rules, and with a schema-free spec.
type bench struct {
	srv   *Server
	tmpl  *unstructured.Unstructured
	cases []*Prepared
	// rules counts the committed CRD's CEL rules.
	rules int
}

func startBench(tb testing.TB) *bench {
	tb.Helper()
	crd, err := LoadCRD(lnCRD)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl, err := LoadObject("testdata/latencynode.json")
	if err != nil {
		tb.Fatal(err)
	}
	crds := []*unstructured.Unstructured{crd,
		Variant(crd, "LatencyNodeNoCEL", StripCEL), Variant(crd, "LatencyNodeLoose", LooseSpec),
		Variant(crd, "LatencyNodeLooseStatus", LooseStatus), Variant(crd, "LatencyNodeNoPatterns", StatusNoPatterns),
		Variant(crd, "LatencyNodeAtomicLists", StatusAtomicLists), Variant(crd, "LatencyNodeAtomic", SingleWriterAtomic)}
	// APICOST_BEFORE_CRD names another version of the CRD (e.g. `git show
	// main:config/crd/bases/...`) served as LatencyNodeBefore, so a change
	// is measured against what it replaces in the same rounds.
	if path := os.Getenv("APICOST_BEFORE_CRD"); path != "" {
		before, err := LoadCRD(path)
		if err != nil {
			tb.Fatal(err)
		}
		crds = append(crds, Variant(before, "LatencyNodeBefore", nil))
	}
	srv, err := Start(assets(tb), crds)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Stop() })
	return &bench{srv: srv, tmpl: tmpl, rules: CountCEL(crd.Object)}
}

// add prepares a case of objects made from the LatencyNode template as kind.
func (b *bench) add(tb testing.TB, name, kind string, n int, shape func(*unstructured.Unstructured), change func(*unstructured.Unstructured, int), status bool) {
	tb.Helper()
	c := Case{Name: name, Status: status, Change: change, Object: func(i int) *unstructured.Unstructured {
		u := Named(b.tmpl, kind, strings.ToLower(name), i)
		if shape != nil {
			shape(u)
		}
		return u
	}}
	p, err := b.srv.Prepare(context.Background(), c, n)
	if err != nil {
		tb.Fatal(err)
	}
	b.cases = append(b.cases, p)
}

// addReference prepares the ConfigMap reference: as large as a stored
// LatencyNode without its managedFields, patched with as many bytes as a
// measurement patch.
func (b *bench) addReference(tb testing.TB, n int) {
	tb.Helper()
	size := len(mustJSON(tb, b.tmpl.Object))
	before := b.tmpl.DeepCopy()
	after := b.tmpl.DeepCopy()
	Measurement(after, 1)
	patch, err := client.MergeFrom(before).Data(after)
	if err != nil {
		tb.Fatal(err)
	}
	c := Case{Name: "ref-configmap", Change: ConfigMapChange(len(patch) - 30),
		Object: func(i int) *unstructured.Unstructured { return ConfigMapLike(fmt.Sprintf("ref-%05d", i), size) }}
	p, err := b.srv.Prepare(context.Background(), c, n)
	if err != nil {
		tb.Fatal(err)
	}
	b.cases = append([]*Prepared{p}, b.cases...)
}

// BenchmarkWriteCost reports the API server's CPU per 1000 writes of each
// kind of LatencyNode write, as a ratio to the same number of ConfigMap
// patches right before it (the median of APICOST_ROUNDS interleaved
// rounds, with min and max). Run it alone, on an idle machine if you can:
//
//	go test ./hack/scale/apicost -run '^$' -bench WriteCost -benchtime 1x -v
//
// APICOST_PATCHES (default 1000) patches per case and round, over
// APICOST_OBJECTS (default 100) objects per case, from 4 clients;
// APICOST_CASES (comma-separated names from caseTable) picks cases;
// APICOST_BEFORE_CRD adds the before-* cases.
func BenchmarkWriteCost(b *testing.B) {
	rounds, m, n := envInt("APICOST_ROUNDS", 3), envInt("APICOST_PATCHES", 1000), envInt("APICOST_OBJECTS", 100)
	want := os.Getenv("APICOST_CASES")
	const workers, refScale = 4, 4
	for it := 0; it < b.N; it++ {
		bn := startBench(b)
		for _, c := range caseTable {
			before := strings.HasPrefix(c.name, "before-")
			if before && os.Getenv("APICOST_BEFORE_CRD") == "" {
				continue
			}
			if want == "" || strings.Contains(","+want+",", ","+c.name+",") {
				bn.add(b, c.name, c.kind, n, c.shape, c.change, c.status)
			}
		}
		bn.addReference(b, n)
		ctx := context.Background()
		// Warm up: CEL programs, caches, the first writes of each kind.
		for _, p := range bn.cases {
			if _, err := bn.srv.Patch(ctx, p, n, workers); err != nil {
				b.Fatal(err)
			}
		}
		per := make(map[string][]float64)
		ratio := make(map[string][]float64)
		bytes := make(map[string]int)
		// The reference is patched right before each case, and the case's
		// ratio is to that batch: the load of other processes changes
		// within seconds, so only adjacent batches compare. A ConfigMap
		// patch costs about a fifth of a LatencyNode's: refScale times as
		// many make the two batches about as long.
		ref := bn.cases[0]
		for r := 0; r < rounds; r++ {
			// Rotate the order so no case always runs first or last.
			for k := 0; k < len(bn.cases)-1; k++ {
				p := bn.cases[1+(k+r)%(len(bn.cases)-1)]
				rs, err := bn.srv.Patch(ctx, ref, refScale*m, workers)
				if err != nil {
					b.Fatal(err)
				}
				s, err := bn.srv.Patch(ctx, p, m, workers)
				if err != nil {
					b.Fatal(err)
				}
				per[ref.Name] = append(per[ref.Name], rs.PerThousand())
				ratio[ref.Name] = append(ratio[ref.Name], 1)
				per[p.Name] = append(per[p.Name], s.PerThousand())
				ratio[p.Name] = append(ratio[p.Name], s.PerThousand()/rs.PerThousand())
				bytes[p.Name], bytes[ref.Name] = s.PatchBytes, rs.PatchBytes
			}
		}
		b.Logf("LatencyNode CRD: %d CEL rules; %d rounds of %d patches per case over %d objects, %d clients", bn.rules, rounds, m, n, workers)
		b.Logf("%-24s %-22s %-22s %7s %14s", "case", "ratio to ConfigMap", "CPU s/1000", "patch B", "object B (mf)")
		for _, p := range bn.cases {
			total, mf, err := bn.srv.ObjectBytes(ctx, p.objs[0])
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%-24s %-22s %-22s %7d %8d (%d)", p.Name, Summarize(ratio[p.Name]), Summarize(per[p.Name]), bytes[p.Name], total, mf)
			b.Logf("    ratios by round: %.2f", ratio[p.Name])
		}
		bn.logIRQSummary(ctx, b, per, ratio)
		b.ReportMetric(Summarize(ratio["ln-status"]).Median, "status-patch/ref")
		b.ReportMetric(Summarize(ratio["ln-spec"]).Median, "spec-patch/ref")
		b.ReportMetric(Summarize(per["ln-status"]).Median, "status-cpu-s/1000")
	}
}

// caseTable is every write measured: the agent's measurement update on the
// LatencyNode as it is (ln-status) and in variants that each take one
// thing away, the smallest status patch, and the manager's spec patch.
var caseTable = []struct {
	name, kind string
	shape      func(*unstructured.Unstructured)
	change     func(*unstructured.Unstructured, int)
	status     bool
}{
	{"ln-status", "LatencyNode", nil, Measurement, true},
	{"ln-status-nocel", "LatencyNodeNoCEL", nil, Measurement, true},
	{"ln-status-loosespec", "LatencyNodeLoose", nil, Measurement, true},
	{"ln-status-loosestatus", "LatencyNodeLooseStatus", nil, Measurement, true},
	{"ln-status-nopatterns", "LatencyNodeNoPatterns", nil, Measurement, true},
	{"ln-status-atomiclists", "LatencyNodeAtomicLists", nil, Measurement, true},
	{"ln-status-atomic", "LatencyNodeAtomic", nil, Measurement, true},
	{"ln-status-256settings", "LatencyNode", ManySettings, Measurement, true},
	{"ln-status-256irq-summarised", "LatencyNode", SummarisedIRQs, Measurement, true},
	{"ln-status-nosettings", "LatencyNode", Without("settings"), Measurement, true},
	{"ln-status-nolatency", "LatencyNode", Without("latency", "current"), Measurement, true},
	{"ln-status-timestamp", "LatencyNode", nil, Timestamp, true},
	{"ln-spec", "LatencyNode", nil, SpecChange, false},
	{"ln-spec-atomic", "LatencyNodeAtomic", nil, SpecChange, false},
	{"ln-spec-nocel", "LatencyNodeNoCEL", nil, SpecChange, false},
	{"before-ln-status", "LatencyNodeBefore", nil, Measurement, true},
	{"before-ln-spec", "LatencyNodeBefore", nil, SpecChange, false},
}

// logIRQSummary puts the 256-IRQ node's status before (one line per IRQ)
// and after (summarised) side by side: stored size and API server cost.
func (b *bench) logIRQSummary(ctx context.Context, tb testing.TB, per, ratio map[string][]float64) {
	before, after := b.prepared("ln-status-256settings"), b.prepared("ln-status-256irq-summarised")
	if before == nil || after == nil {
		return
	}
	bt, bmf, err := b.srv.ObjectBytes(ctx, before.objs[0])
	if err != nil {
		tb.Fatal(err)
	}
	at, amf, err := b.srv.ObjectBytes(ctx, after.objs[0])
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("256 IRQs, per-IRQ lines → summarised: object %d B (mf %d) → %d B (mf %d), %.2f×; CPU s/1000 %s → %s; ratio to ConfigMap %s → %s",
		bt, bmf, at, amf, float64(at)/float64(bt), Summarize(per[before.Name]), Summarize(per[after.Name]),
		Summarize(ratio[before.Name]), Summarize(ratio[after.Name]))
	if tb, ok := tb.(*testing.B); ok {
		tb.ReportMetric(float64(at)/float64(bt), "irq-summary-size/before")
		tb.ReportMetric(Summarize(per[after.Name]).Median/Summarize(per[before.Name]).Median, "irq-summary-cpu/before")
	}
}

func (b *bench) prepared(name string) *Prepared {
	for _, p := range b.cases {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
