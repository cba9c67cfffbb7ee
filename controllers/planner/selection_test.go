package planner

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

func profile(name string, priority int32, match map[string]string) v1alpha1.LatencyProfile {
	return v1alpha1.LatencyProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: match},
			Priority:     priority,
		},
	}
}

func TestResolveNode(t *testing.T) {
	deleted := profile("deleted", 100, map[string]string{"tier": "rt"})
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	bad := profile("bad", 100, nil)
	bad.Spec.NodeSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}

	cases := []struct {
		name     string
		labels   map[string]string
		profiles []v1alpha1.LatencyProfile
		want     Resolution
	}{
		{"no profile", map[string]string{"tier": "rt"}, nil, Resolution{}},
		{"not selected", map[string]string{"tier": "web"},
			[]v1alpha1.LatencyProfile{profile("a", 0, map[string]string{"tier": "rt"})}, Resolution{}},
		{"selected", map[string]string{"tier": "rt"},
			[]v1alpha1.LatencyProfile{profile("a", 0, map[string]string{"tier": "rt"})}, Resolution{Winner: "a"}},
		{"higher priority wins", map[string]string{"tier": "rt", "zone": "a"},
			[]v1alpha1.LatencyProfile{
				profile("low", 1, map[string]string{"tier": "rt"}),
				profile("high", 5, map[string]string{"zone": "a"}),
			}, Resolution{Winner: "high"}},
		{"equal priority conflicts", map[string]string{"tier": "rt", "zone": "a"},
			[]v1alpha1.LatencyProfile{
				profile("b", 5, map[string]string{"zone": "a"}),
				profile("a", 5, map[string]string{"tier": "rt"}),
				profile("low", 1, map[string]string{"tier": "rt"}),
			}, Resolution{Conflict: []string{"a", "b"}}},
		{"tie below the winner is no conflict", map[string]string{"tier": "rt"},
			[]v1alpha1.LatencyProfile{
				profile("x", 1, map[string]string{"tier": "rt"}),
				profile("y", 1, map[string]string{"tier": "rt"}),
				profile("top", 2, map[string]string{"tier": "rt"}),
			}, Resolution{Winner: "top"}},
		{"deleted profile takes no node", map[string]string{"tier": "rt"},
			[]v1alpha1.LatencyProfile{deleted, profile("next", 0, map[string]string{"tier": "rt"})},
			Resolution{Winner: "next"}},
		{"invalid selector is ignored", map[string]string{"x": "1"},
			[]v1alpha1.LatencyProfile{bad}, Resolution{}},
		{"empty selector selects every node", map[string]string{"any": "thing"},
			[]v1alpha1.LatencyProfile{profile("all", 0, nil)}, Resolution{Winner: "all"}},
		{"our own label never selects", map[string]string{v1alpha1.ProfileLabel: "a"},
			[]v1alpha1.LatencyProfile{profile("a", 0, map[string]string{v1alpha1.ProfileLabel: "a"})}, Resolution{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cands, _ := CompileProfiles(tc.profiles)
			got := ResolveNode(tc.labels, cands)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ResolveNode = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCompileProfilesReportsBadSelector(t *testing.T) {
	bad := profile("bad", 0, nil)
	bad.Spec.NodeSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}
	cands, errs := CompileProfiles([]v1alpha1.LatencyProfile{bad, profile("ok", 0, nil)})
	if len(cands) != 1 || cands[0].name != "ok" {
		t.Fatalf("candidates = %+v, want only ok", cands)
	}
	if errs["bad"] == nil {
		t.Fatalf("no error reported for the bad selector")
	}
}

// TestDecider: one profile's pass decides each node: the winner, else the
// profile its LatencyNode names, else the one its label names.
func TestDecider(t *testing.T) {
	cases := []struct {
		name      string
		res       Resolution
		ln        bool
		lnProfile string
		label     string
		want      string
	}{
		{"joins its winner", Resolution{Winner: "a"}, false, "", "", "a"},
		{"taken over by the winner", Resolution{Winner: "b"}, true, "a", "a", "b"},
		{"left the selection: released by its LatencyNode's profile", Resolution{}, true, "a", "a", "a"},
		{"lost a tie: released by its LatencyNode's profile", Resolution{Conflict: []string{"a", "b"}}, true, "a", "a", "a"},
		{"released, LatencyNode gone, label left", Resolution{}, false, "", "a", "a"},
		{"never selected", Resolution{}, false, "", "", ""},
	}
	for _, tc := range cases {
		if got := Decider(tc.res, tc.ln, tc.lnProfile, tc.label); got != tc.want {
			t.Errorf("%s: Decider = %q, want %q", tc.name, got, tc.want)
		}
	}
}
