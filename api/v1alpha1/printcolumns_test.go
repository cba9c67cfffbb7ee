package v1alpha1_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The widest value a person realistically sees in each column, by JSONPath
// (or type): a 40-character node name, a 32-character profile name, a
// p99 like 999.999µs, a rollout phase, a 5-digit count, an age like 2y45d.
var widest = map[string]string{
	"NAME:LatencyNode":          strings.Repeat("n", 40),
	"NAME:LatencyProfile":       strings.Repeat("p", 32),
	".spec.profile":             strings.Repeat("p", 32),
	".spec.action":              "Baseline",
	".spec.revision":            strings.Repeat("p", 32) + "-5d8f7c9b6a",
	".status.rollout.revision":  strings.Repeat("p", 32) + "-5d8f7c9b6a",
	".status.rollout.phase":     "Progressing",
	".status.kernel.version":    "6.12.57+deb13-amd64",
	".status.throttledRatio":    "0.0123",
	".status.maxThrottledRatio": "0.0123",
	"type:integer":              "10000",
	"type:date":                 "2y45d",
	"p99":                       "999.999µs",
	"condition":                 "Unknown",
	`.status.conditions[?(@.type=="Ready")].reason`: "AllNodesApplied",
	".status.summary.applied":                       "Unknown",
	".status.summary.p99":                           "999.999µs",
	".status.summary.worstP99":                      "999.999µs",
	".status.summary.ready":                         "Unknown",
	".status.summary.rollout":                       "Progressing",
}

// kubectl's table printer: tabwriter with minwidth 6 and padding 3.
const (
	minCell = 6
	padding = 3
	maxLine = 120
)

// TestDefaultColumnsFit120: kubectl get latencynodes / latencyprofiles
// with the default columns (priority 0) fits a 120-column terminal with
// the widest realistic values; the rest is for -o wide (priority 1).
func TestDefaultColumnsFit120(t *testing.T) {
	for _, f := range []string{"tuning.latencytier.io_latencynodes.yaml", "tuning.latencytier.io_latencyprofiles.yaml"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", f))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatal(err)
		}
		for _, v := range crd.Spec.Versions {
			kind := crd.Spec.Names.Kind
			cells := []string{widest["NAME:"+kind]}
			heads := []string{"NAME"}
			wide := 0
			for _, c := range v.AdditionalPrinterColumns {
				if c.Priority > 0 {
					wide++
					continue
				}
				val, ok := widestValue(c)
				if !ok {
					t.Errorf("%s column %s (%s): no widest value known; add one", kind, c.Name, c.JSONPath)
				}
				cells, heads = append(cells, val), append(heads, strings.ToUpper(c.Name))
			}
			if w := tableWidth(heads, cells); w > maxLine {
				t.Errorf("kubectl get %s prints %d columns, %d characters wide (over %d): %s; move some to priority 1",
					strings.ToLower(kind)+"s", len(heads), w, maxLine, strings.Join(heads, " "))
			} else {
				t.Logf("%s: %d default columns, %d characters; %d more with -o wide", kind, len(heads), w, wide)
			}
			if len(heads)-1 > 8 {
				t.Errorf("%s has %d default columns besides NAME, want a handful (at most 8)", kind, len(heads)-1)
			}
		}
	}
}

func widestValue(c apiextensionsv1.CustomResourceColumnDefinition) (string, bool) {
	switch {
	case widest[c.JSONPath] != "":
		return widest[c.JSONPath], true
	case c.Type == "integer" || c.Type == "date":
		return widest["type:"+c.Type], true
	case strings.Contains(strings.ToLower(c.JSONPath), "p99"):
		return widest["p99"], true
	case strings.HasPrefix(c.JSONPath, ".status.conditions[") && strings.HasSuffix(c.JSONPath, ".status"):
		return widest["condition"], true
	}
	return "", false
}

// tableWidth is the width of a line of the widest cells, headers included.
func tableWidth(heads, cells []string) int {
	w := 0
	for i := range heads {
		n := max(utf8.RuneCountInString(heads[i]), utf8.RuneCountInString(cells[i]))
		if i < len(heads)-1 {
			n = max(minCell, n+padding)
		}
		w += n
	}
	return w
}
