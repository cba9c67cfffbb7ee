package crd

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/api/v1alpha1"
)

// startAPIServer runs a real kube-apiserver and etcd (envtest) with the
// generated CRDs of bases/ until the test ends.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		out, err := exec.Command("../../hack/k8s-binaries.sh", "--print-dir").Output()
		if err != nil {
			t.Fatalf("finding envtest binaries (hack/k8s-binaries.sh): %v", err)
		}
		t.Setenv("KUBEBUILDER_ASSETS", strings.TrimSpace(string(out)))
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{"bases"}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	return cfg
}

// table is what kubectl get receives: the server-side Table of the CRD's
// printer columns.
type table struct {
	ColumnDefinitions []struct {
		Name, Type string
		Priority   int
	} `json:"columnDefinitions"`
	Rows []struct {
		Cells []any `json:"cells"`
	} `json:"rows"`
}

// rolloutCounts are the verdict columns: the API's verdict words.
var rolloutCounts = func() map[string]bool {
	m := map[string]bool{}
	for _, v := range v1alpha1.Verdicts {
		m[v] = true
	}
	return m
}()

// TestProfileCountColumnsNeverBlank: kubectl get lp printed DEGRADED,
// STALE, CONFLICTED and OUTSIDE-BUDGET empty for a healthy profile
// (docs/transcripts/get-lp-wide.txt): the manager writes status with a JSON
// merge patch, which leaves out a count that stayed 0, so the stored object
// lacked it and the printer column had nothing to print (a printer column
// cannot default). The schema's default of 0 fills the count whenever the
// object is read. This writes status the way the manager does (a merge
// patch naming only the counts that changed) on a real API server and asks
// it for kubectl's Table: every integer column, -o wide's included, holds a
// number.
func TestProfileCountColumnsNeverBlank(t *testing.T) {
	cfg := startAPIServer(t)
	s := scheme.Scheme
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "samples", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.LatencyProfile{}
	if err := yaml.UnmarshalStrict(b, p); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"matched":1,"applied":1}}`))
	if err := c.Status().Patch(ctx, p, patch); err != nil {
		t.Fatal(err)
	}
	if p.Status.Matched != 1 {
		t.Fatalf("status patch not applied: %+v", p.Status)
	}

	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.RESTClientForConfigAndClient(func() *rest.Config {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &v1alpha1.GroupVersion
		c.APIPath = "/apis"
		c.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
		return c
	}(), hc)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rc.Get().Resource("latencyprofiles").Name(p.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Param("includeObject", "None").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var tab table
	if err := json.Unmarshal(raw, &tab); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if len(tab.Rows) != 1 || len(tab.Rows[0].Cells) != len(tab.ColumnDefinitions) {
		t.Fatalf("table %s", raw)
	}
	ints := 0
	for i, col := range tab.ColumnDefinitions {
		// The rollout's counts live in status.rollout, absent until a
		// rollout starts (blank then means "no rollout"; a default cannot
		// create the parent), and written whole when it does.
		if col.Type != "integer" || rolloutCounts[col.Name] {
			continue
		}
		ints++
		if cell := tab.Rows[0].Cells[i]; cell == nil || cell == "" {
			t.Errorf("column %s (priority %d) is blank for a profile whose count is 0", col.Name, col.Priority)
		}
	}
	if ints < 7 {
		t.Errorf("only %d integer columns: %s", ints, raw)
	}
}

// TestPrinterColumnsNeverBlank: kubectl get latencyprofiles and kubectl get
// latencynodes, -o wide included, print no empty cell for objects just
// created, before the manager or an agent wrote any status. It failed while
// the columns read fields that are absent until written (the Ready and
// Applied conditions, p99s, the rollout's phase and counts, the evidence
// windows, partitions, boot): the API server's Table had empty cells there,
// and a printer column cannot default. The columns now read spec, the
// counts (default 0) and status.summary (default "-"). This lists both
// kinds as kubectl does, asking the real API server for the Table.
func TestPrinterColumnsNeverBlank(t *testing.T) {
	cfg := startAPIServer(t)
	s := scheme.Scheme
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "samples", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.LatencyProfile{}
	if err := yaml.UnmarshalStrict(b, p); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// As the manager creates it (controllers.applySpec).
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "worker-7"}, Spec: v1alpha1.LatencyNodeSpec{
		Action: v1alpha1.ActionApply, Profile: p.Name, ProfileGeneration: p.Generation,
		Tuning: *p.Spec.TuningSpec.DeepCopy(), Revision: p.Name + "-5d8f9c7b6",
	}}
	if err := c.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}

	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.RESTClientForConfigAndClient(func() *rest.Config {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &v1alpha1.GroupVersion
		c.APIPath = "/apis"
		c.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
		return c
	}(), hc)
	if err != nil {
		t.Fatal(err)
	}
	for _, resource := range []string{"latencyprofiles", "latencynodes"} {
		raw, err := rc.Get().Resource(resource).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Param("includeObject", "None").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var tab table
		if err := json.Unmarshal(raw, &tab); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		if len(tab.Rows) != 1 || len(tab.ColumnDefinitions) < 10 {
			t.Fatalf("%s: table %s", resource, raw)
		}
		for _, row := range tab.Rows {
			if len(row.Cells) != len(tab.ColumnDefinitions) {
				t.Fatalf("%s: row %v for %d columns", resource, row.Cells, len(tab.ColumnDefinitions))
			}
			for i, col := range tab.ColumnDefinitions {
				if cell := row.Cells[i]; cell == nil || cell == "" {
					t.Errorf("kubectl get %s: column %s (priority %d) is blank for a new object", resource, col.Name, col.Priority)
				}
			}
		}
	}
}
