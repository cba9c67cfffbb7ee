//go:build privileged

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/privtest"
)

func TestCommandPrintsRunqlatShape(t *testing.T) {
	privtest.Root(t)
	var out bytes.Buffer
	if err := measureCommand(context.Background(), []string{"--duration", "300ms", "--isolated", "1", "--reserved", "0"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"Tracing run queue latency with EBPF", "class Node:", "class Isolated:", "usecs               : count    distribution", " -> ", "p50 ", "p99 ", "p99.9 ", "max ", "WithinBudget="} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}

	out.Reset()
	if err := measureCommand(context.Background(), []string{"--duration", "200ms", "--json", "--attach", "none"}, &out); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Latency *v1alpha1.LatencyStatus
		Budget  metav1.Condition
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out.String())
	}
	if res.Budget.Type != v1alpha1.NodeWithinBudget {
		t.Errorf("json budget %+v", res.Budget)
	}
}
