package controllers

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

func TestLabelPatch(t *testing.T) {
	const pl, oa = v1alpha1.ProfileLabel, v1alpha1.OwnedLabelsAnnotation
	node := func(lbls, ann map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: lbls, Annotations: ann}}
	}
	cases := []struct {
		name        string
		node        *corev1.Node
		want        string
		wantPatch   map[string]any
		wantForeign bool
	}{
		{"add to a bare node", node(map[string]string{"team": "x"}, nil), "a",
			map[string]any{"metadata": map[string]any{
				"labels":      map[string]any{pl: "a"},
				"annotations": map[string]any{oa: pl},
			}}, false},
		{"already labelled", node(map[string]string{pl: "a"}, map[string]string{oa: pl}), "a", nil, false},
		{"switch profile", node(map[string]string{pl: "a"}, map[string]string{oa: pl}), "b",
			map[string]any{"metadata": map[string]any{
				"labels":      map[string]any{pl: "b"},
				"annotations": map[string]any{oa: pl},
			}}, false},
		{"remove owned only", node(map[string]string{pl: "a", "team": "x"}, map[string]string{oa: pl, "other": "y"}), "",
			map[string]any{"metadata": map[string]any{
				"labels":      map[string]any{pl: nil},
				"annotations": map[string]any{oa: nil},
			}}, false},
		{"nothing to remove", node(map[string]string{"team": "x"}, nil), "", nil, false},
		{"foreign profile label is left alone", node(map[string]string{pl: "mine"}, nil), "a", nil, true},
		{"foreign profile label is not removed", node(map[string]string{pl: "mine"}, nil), "", nil, true},
		// The annotation is user-editable: a key someone added to it is
		// still not a label the controller set, so it is never removed.
		{"user-added key in the owned annotation is not removed",
			node(map[string]string{pl: "a", "team": "x"}, map[string]string{oa: pl + ",team"}), "",
			map[string]any{"metadata": map[string]any{
				"labels":      map[string]any{pl: nil},
				"annotations": map[string]any{oa: nil},
			}}, false},
		{"owned annotation naming only a foreign label changes nothing",
			node(map[string]string{"team": "x"}, map[string]string{oa: "team"}), "", nil, false},
		{"owned annotation left after a label vanished", node(nil, map[string]string{oa: pl}), "",
			map[string]any{"metadata": map[string]any{
				"annotations": map[string]any{oa: nil},
			}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			patch, foreign := labelPatch(tc.node, tc.want)
			if foreign != tc.wantForeign {
				t.Fatalf("foreign = %v, want %v", foreign, tc.wantForeign)
			}
			if !reflect.DeepEqual(patch, tc.wantPatch) {
				t.Fatalf("patch = %#v\nwant    %#v", patch, tc.wantPatch)
			}
		})
	}
}

func TestOwnedAnnotationSortsAndDedups(t *testing.T) {
	if got := ownedAnnotation([]string{"b", "a", "b"}); got != "a,b" {
		t.Fatalf("ownedAnnotation = %q", got)
	}
	if got := ownedLabelKeys(map[string]string{v1alpha1.OwnedLabelsAnnotation: " a, ,b"}); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("ownedLabelKeys = %q", got)
	}
}
