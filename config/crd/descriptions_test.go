package crd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// trackerRef matches a reference to an issue or pull request of the
// project's tracker, which users of the CRDs cannot see: "issue 26",
// "issues 12 and 40", "#12", "PR 7".
var trackerRef = regexp.MustCompile(`(?i)\b(issues?|pr|pull request)\s*#?\d+|(^|[\s(\[,])#\d+\b`)

// descriptions returns every description of a CRD document, with its
// path, in order.
func descriptions(v any, path string, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if s, ok := v[k].(string); ok && k == "description" {
				*out = append(*out, path+": "+s)
				continue
			}
			descriptions(v[k], path+"."+k, out)
		}
	case []any:
		for i, e := range v {
			descriptions(e, fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// TestDescriptionsCiteNoTrackerIssue: what kubectl explain prints (every
// description in the generated CRDs, here and in the chart's copy) is in
// the product's own words and cites no issue of our tracker. It failed on
// three descriptions ending "(issue 26)".
func TestDescriptionsCiteNoTrackerIssue(t *testing.T) {
	files, err := filepath.Glob("bases/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	chart, err := filepath.Glob("../../charts/latencytier/crds/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, chart...)
	if len(files) < 4 {
		t.Fatalf("found CRDs %v, want both kinds in bases/ and the chart", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var descs []string
		descriptions(doc, "", &descs)
		if len(descs) < 50 {
			t.Fatalf("%s: %d descriptions, too few to be the CRD", f, len(descs))
		}
		for _, d := range descs {
			if m := trackerRef.FindString(d); m != "" {
				t.Errorf("%s: %q cites the tracker: %.200s", f, m, d)
			}
		}
	}
}

// TestTrackerRefMatches: references match; what looks like one but is not
// (a count, a CPU list, a port, an anchor) does not.
func TestTrackerRefMatches(t *testing.T) {
	for s, want := range map[string]bool{
		"rebooted into (issue 26).": true,
		"see Issue #40":             true,
		"issues 12 and 40":          true,
		"fixed in #12":              true,
		"(#7)":                      true,
		"PR 31":                     true,
		"at most 16 CPUs":           false,
		"cpus 0-3,#":                false,
		"docs/rollout.md#canary":    false,
		"port 9850":                 false,
		"a tissue 3":                false,
		"an issue the node reports (Unsupported)": false,
	} {
		if got := trackerRef.MatchString(s); got != want {
			t.Errorf("%q: matched %v, want %v", s, got, want)
		}
	}
}
