package main

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Status quotes names tenants chose; a thread named "\x1b[31mevil\n" must
// print escaped: no ESC reaches the terminal and no line is forged.
func TestExplainEscapesTenantStrings(t *testing.T) {
	evil := "\x1b[31mevil\nNode:     forged"
	n := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "w-1"}}
	n.Status.Findings = []v1alpha1.Finding{{Type: "RTTasksOnReserved", Severity: "Warning", Message: "1 real-time tasks: " + evil}}
	n.Status.Settings = []v1alpha1.SettingResult{{Setting: "rtsched/a/b/u/1@2", State: v1alpha1.SettingFailed, Message: "thread 1 (" + evil + ")"}}
	var out bytes.Buffer
	if err := explain(&out, n, verdicts{}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.Contains(s, "\x1b") {
		t.Errorf("an ESC reached the output:\n%q", s)
	}
	if strings.Contains(s, "\nNode:     forged") {
		t.Errorf("a forged line reached the output:\n%s", s)
	}
	if strings.Count(s, `\x1b[31mevil\x0aNode:     forged`) != 2 {
		t.Errorf("want the finding and the setting message escaped:\n%s", s)
	}
}
