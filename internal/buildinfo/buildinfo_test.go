package buildinfo

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// series returns the labels and value of every latencytier_build_info
// series reg gathers.
func series(t *testing.T, reg prometheus.Gatherer) []map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, mf := range mfs {
		if mf.GetName() != MetricName {
			continue
		}
		if mf.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is a %s, want a gauge", MetricName, mf.GetType())
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if v := m.GetGauge().GetValue(); v != 1 {
				t.Errorf("%s%v = %g, want 1", MetricName, l, v)
			}
			out = append(out, l)
		}
	}
	return out
}

func TestRegisterServesOneSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	for range 2 { // twice: the second is no error and no second series
		if err := Register(reg, "agent", "v1.2.3"); err != nil {
			t.Fatal(err)
		}
	}
	got := series(t, reg)
	if len(got) != 1 {
		t.Fatalf("%d series, want 1: %v", len(got), got)
	}
	want := map[string]string{"version": "v1.2.3", "goversion": runtime.Version(), "role": "agent"}
	for k, v := range want {
		if got[0][k] != v {
			t.Errorf("label %s=%q, want %q", k, got[0][k], v)
		}
	}
	if len(got[0]) != len(want) {
		t.Errorf("labels %v, want exactly %v", got[0], want)
	}
}
