package apicost

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"latencytier.io/latencytier/agent/loop"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

// LoadObject reads a JSON object (testdata/latencynode.json: one
// LatencyNode as the manager rendered and a simulated agent reported it in
// a fleetsim run, with the gateway sample's tuning).
func LoadObject(path string) (*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	return u, json.Unmarshal(b, &u.Object)
}

// Named returns a copy of tmpl named prefix-i, served as kind.
func Named(tmpl *unstructured.Unstructured, kind, prefix string, i int) *unstructured.Unstructured {
	u := tmpl.DeepCopy()
	u.SetKind(kind)
	u.SetName(fmt.Sprintf("%s-%05d", prefix, i))
	return u
}

// Measurement changes an object's status as one measurement window does:
// new latency figures, window and times, and the WithinBudget message that
// quotes the p99 (the agent's status for a window with the spec unchanged).
func Measurement(u *unstructured.Unstructured, seq int) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(seq) * 30 * time.Second).Format(time.RFC3339)
	p99 := fmt.Sprintf("%d.%03dµs", 40+seq%9, seq%1000)
	window := fmt.Sprintf("30.%03ds", seq%1000)
	st := u.Object["status"].(map[string]any)
	st["runQueueP99"] = p99
	if lat, ok := st["latency"].(map[string]any); ok {
		lat["measuredAt"], lat["window"] = at, window
		for _, c := range lat["classes"].([]any) {
			c := c.(map[string]any)
			c["p50"], c["p99"], c["p999"] = fmt.Sprintf("%dµs", 30+seq%7), p99, fmt.Sprintf("%dµs", 50+seq%11)
			c["samples"] = int64(10000 + seq%500)
			c["buckets"] = []any{map[string]any{"le": "44µs", "count": int64(9000 + seq%500)},
				map[string]any{"le": "64µs", "count": int64(1000)}}
		}
	}
	if cur, ok := st["current"].(map[string]any); ok {
		cur["measuredAt"], cur["window"] = at, window
		rq := cur["runQueue"].(map[string]any)
		rq["p99"], rq["samples"] = p99, int64(10000+seq%500)
	}
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		if c := c.(map[string]any); c["type"] == "WithinBudget" {
			c["message"] = "run-queue p99 " + p99 + " <= budget 2ms"
		}
	}
}

// Timestamp changes only status.current.measuredAt: the smallest status
// patch, for the patch-size comparison.
func Timestamp(u *unstructured.Unstructured, seq int) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Second).Format(time.RFC3339)
	_ = unstructured.SetNestedField(u.Object, at, "status", "current", "measuredAt")
}

// SpecChange is the manager's spec patch on a profile change: the resolved
// tuning's migrationCost, the profile generation, the revision and its
// stamp annotation.
func SpecChange(u *unstructured.Unstructured, seq int) {
	_ = unstructured.SetNestedField(u.Object, fmt.Sprintf("%dms", 4+seq%2), "spec", "tuning", "scheduler", "migrationCost")
	_ = unstructured.SetNestedField(u.Object, int64(seq+1), "spec", "profileGeneration")
	_ = unstructured.SetNestedField(u.Object, fmt.Sprintf("gateway-%08x", seq), "spec", "revision")
	a := u.GetAnnotations()
	a["latencytier.io/revision-set-at"] = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Second).Format(time.RFC3339)
	u.SetAnnotations(a)
}

// ManySettings gives a LatencyNode status the most settings it may hold
// (256), as a node with many IRQs and cgroups reports.
func ManySettings(u *unstructured.Unstructured) {
	s := make([]any, 0, 256)
	for i := 0; i < 256; i++ {
		s = append(s, map[string]any{"setting": settingid.IRQ.ID(strconv.Itoa(24 + i)), "desired": "0", "actual": "0", "state": "Applied"})
	}
	_ = unstructured.SetNestedSlice(u.Object, s, "status", "settings")
}

// SummarisedIRQs is ManySettings as the agent reports it since issue 30:
// the 256 IRQ lines summarised by the agent's own loop.SummariseIRQs (one
// line, irq/24-279, count 256).
func SummarisedIRQs(u *unstructured.Unstructured) {
	ManySettings(u)
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "settings")
	rs := make([]v1alpha1.SettingResult, len(raw))
	for i, r := range raw {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(r.(map[string]any), &rs[i]); err != nil {
			panic(err)
		}
	}
	out := []any{}
	for _, r := range loop.SummariseIRQs(rs) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
		if err != nil {
			panic(err)
		}
		out = append(out, m)
	}
	_ = unstructured.SetNestedSlice(u.Object, out, "status", "settings")
}

// ConfigMapLike returns a ConfigMap named name whose data holds size bytes
// (the reference: a built-in kind with no schema beyond its Go type).
func ConfigMapLike(name string, size int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"data":     map[string]any{"status": strings.Repeat("x", size), "measurement": ""}}}
	return u
}

// ConfigMapChange rewrites the measurement key with size bytes that
// differ per seq (a patch of about the size of a LatencyNode measurement
// patch).
func ConfigMapChange(size int) func(*unstructured.Unstructured, int) {
	return func(u *unstructured.Unstructured, seq int) {
		v := fmt.Sprintf("%08d", seq)
		_ = unstructured.SetNestedField(u.Object, strings.Repeat(v, size/len(v)+1)[:size], "data", "measurement")
	}
}

// Without returns a shape that removes status fields (to see what each
// part of the status costs).
func Without(fields ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		for _, f := range fields {
			unstructured.RemoveNestedField(u.Object, "status", f)
		}
	}
}
