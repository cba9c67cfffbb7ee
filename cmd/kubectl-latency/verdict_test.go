package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"latencytier.io/latencytier/api/v1alpha1"
)

// TestVerdictWordsAreTheAPIs: every verdict the plugin prints is one of
// the API's words (v1alpha1.Verdicts, which the CRD's printer columns
// name), or "-", or the passing ones joined when the counts cannot tell
// which a node got. The plugin printed "Passed" where kubectl get said
// Improved.
func TestVerdictWordsAreTheAPIs(t *testing.T) {
	applied := func(name string) *v1alpha1.LatencyNode {
		n := &v1alpha1.LatencyNode{}
		n.Name = name
		n.Spec.Action, n.Spec.Revision = v1alpha1.ActionApply, "r1"
		n.Status.Current = &v1alpha1.LatencyEvidence{Action: v1alpha1.ActionApply, Revision: "r1"}
		return n
	}
	ro := func(improved, unchanged int32, listed ...v1alpha1.NodeVerdictStatus) verdicts {
		return verdicts{&v1alpha1.RolloutStatus{Improved: improved, Unchanged: unchanged, Verdicts: listed}}
	}
	both := strings.Join(v1alpha1.PassingVerdicts, "|")
	for name, c := range map[string]struct {
		vs   verdicts
		n    *v1alpha1.LatencyNode
		want string
	}{
		"listed regressed":       {ro(1, 0, v1alpha1.NodeVerdictStatus{Node: "w-1", Verdict: v1alpha1.VerdictRegressed}), applied("w-1"), v1alpha1.VerdictRegressed},
		"listed inconclusive":    {ro(1, 0, v1alpha1.NodeVerdictStatus{Node: "w-1", Verdict: v1alpha1.VerdictInconclusive}), applied("w-1"), v1alpha1.VerdictInconclusive},
		"passed, all improved":   {ro(3, 0), applied("w-1"), v1alpha1.VerdictImproved},
		"passed, all unchanged":  {ro(0, 2), applied("w-1"), v1alpha1.VerdictUnchanged},
		"passed, either":         {ro(2, 1), applied("w-1"), both},
		"no rollout":             {verdicts{}, applied("w-1"), "-"},
		"none passed, unlisted":  {ro(0, 0), applied("w-1"), "-"},
		"another revision":       {ro(1, 0), func() *v1alpha1.LatencyNode { n := applied("w-1"); n.Spec.Revision = "r2"; return n }(), "-"},
		"no window under it yet": {ro(1, 0), func() *v1alpha1.LatencyNode { n := applied("w-1"); n.Status.Current = nil; return n }(), "-"},
	} {
		got := c.vs.verdict(c.n)
		if got != c.want {
			t.Errorf("%s: verdict %q, want %q", name, got, c.want)
		}
		for _, w := range strings.Split(got, "|") {
			if w != "-" && !slices.Contains(v1alpha1.Verdicts, w) {
				t.Errorf("%s: verdict %q: %q is not an API verdict %v", name, got, w, v1alpha1.Verdicts)
			}
		}
	}
}

// TestNoVerdictWordOfItsOwn: the plugin's code spells no verdict of its
// own; every word comes from the API's constants.
func TestNoVerdictWordOfItsOwn(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	own := []string{"Passed", "Pass", "Failed", "Improved", "Unchanged", "Regressed", "Inconclusive"}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && slices.Contains(own, s) {
				t.Errorf("%s: the literal %q: use the v1alpha1 verdict constants", fset.Position(lit.Pos()), s)
			}
			return true
		})
	}
}
