package planner

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// drawing is Machine as the Mermaid state diagram docs/architecture.md
// shows: one arrow per row, labelled with its event and, for a reboot
// act, the act; rows still decided in controllers/ say so.
func drawing() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	for _, t := range Machine {
		label := string(t.On)
		if t.Act != Wait {
			label += " / " + t.Act.String()
		}
		if !strings.HasPrefix(t.Decider, "planner.") {
			label += " (controllers)"
		}
		fmt.Fprintf(&b, "    %s --> %s: %s\n", t.From, t.To, label)
	}
	return b.String()
}

// TestArchitectureDrawsTheMachine: the drawing in docs/architecture.md is
// the table in code, not a copy that drifts from it.
func TestArchitectureDrawsTheMachine(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	const open = "```mermaid\n"
	_, rest, ok := strings.Cut(string(doc), open+"stateDiagram-v2\n")
	if !ok {
		t.Fatalf("docs/architecture.md has no Mermaid state diagram; it should hold:\n%s%s```", open, drawing())
	}
	body, _, _ := strings.Cut(rest, "```")
	if got := "stateDiagram-v2\n" + body; got != drawing() {
		t.Errorf("docs/architecture.md's state diagram differs from Machine; it should read:\n%s%s```", open, drawing())
	}
}
