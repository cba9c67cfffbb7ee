package apicost

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// LoadCRD reads one CustomResourceDefinition manifest.
func LoadCRD(path string) (*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}

// Variant returns a copy of crd served under kind (its plural the
// lowercased kind + "s") with change applied to the copy's
// openAPIV3Schema, so variants of one CRD live side by side in one API
// server.
func Variant(crd *unstructured.Unstructured, kind string, change func(schema map[string]any)) *unstructured.Unstructured {
	v := crd.DeepCopy()
	group, _, _ := unstructured.NestedString(v.Object, "spec", "group")
	plural := strings.ToLower(kind) + "s"
	v.SetName(plural + "." + group)
	v.SetAnnotations(nil)
	_ = unstructured.SetNestedMap(v.Object, map[string]any{
		"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind),
	}, "spec", "names")
	if change == nil {
		return v
	}
	versions, _, _ := unstructured.NestedSlice(v.Object, "spec", "versions")
	for _, ver := range versions {
		if s, ok := ver.(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any); ok {
			change(s)
		}
	}
	_ = unstructured.SetNestedSlice(v.Object, versions, "spec", "versions")
	return v
}

// StripCEL removes every x-kubernetes-validations rule from a schema.
func StripCEL(schema map[string]any) {
	delete(schema, "x-kubernetes-validations")
	for _, v := range schema {
		walk(v, StripCEL)
	}
}

func walk(v any, f func(map[string]any)) {
	switch t := v.(type) {
	case map[string]any:
		f(t)
	case []any:
		for _, e := range t {
			walk(e, f)
		}
	}
}

// LooseSpec replaces the schema of spec by an object that keeps unknown
// fields: no structure, no bounds, no CEL (what a schema-free spec costs).
func LooseSpec(schema map[string]any) {
	props, _ := schema["properties"].(map[string]any)
	props["spec"] = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
}

// CountCEL counts the x-kubernetes-validations rules in a schema.
func CountCEL(v any) int {
	n := 0
	switch t := v.(type) {
	case map[string]any:
		if r, ok := t["x-kubernetes-validations"].([]any); ok {
			n += len(r)
		}
		for _, e := range t {
			n += CountCEL(e)
		}
	case []any:
		for _, e := range t {
			n += CountCEL(e)
		}
	}
	return n
}

// LooseStatus replaces the schema of status by an object that keeps
// unknown fields (what validating the status schema costs).
func LooseStatus(schema map[string]any) {
	props, _ := schema["properties"].(map[string]any)
	props["status"] = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
}

// statusSchema returns the schema of status.
func statusSchema(schema map[string]any) map[string]any {
	return schema["properties"].(map[string]any)["status"].(map[string]any)
}

// StatusNoPatterns removes every pattern from the status schema (what the
// duration patterns cost).
func StatusNoPatterns(schema map[string]any) {
	var f func(map[string]any)
	f = func(m map[string]any) {
		delete(m, "pattern")
		for _, v := range m {
			walk(v, f)
		}
	}
	f(statusSchema(schema))
}

// StatusAtomicLists makes every list in status atomic: one owner per list
// in managedFields, not one per element.
func StatusAtomicLists(schema map[string]any) {
	var f func(map[string]any)
	f = func(m map[string]any) {
		if _, ok := m["x-kubernetes-list-type"]; ok {
			m["x-kubernetes-list-type"] = "atomic"
			delete(m, "x-kubernetes-list-map-keys")
		}
		for _, v := range m {
			walk(v, f)
		}
	}
	f(statusSchema(schema))
}

// SingleWriterAtomic marks what one writer alone writes atomic, so
// managedFields name the part, not every field in it: the agent's
// status.latency, current, baseline, kernel (and its lists), the manager's
// spec.tuning.
func SingleWriterAtomic(schema map[string]any) {
	StatusAtomicLists(schema)
	st := statusSchema(schema)["properties"].(map[string]any)
	for _, f := range []string{"latency", "current", "baseline", "kernel"} {
		st[f].(map[string]any)["x-kubernetes-map-type"] = "atomic"
	}
	spec := schema["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
	spec["tuning"].(map[string]any)["x-kubernetes-map-type"] = "atomic"
}
