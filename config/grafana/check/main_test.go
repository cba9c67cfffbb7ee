package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRunRefusesBadFlags: no Prometheus, stray arguments, a non-positive
// range or a missing dashboard exit 2 before any query.
func TestRunRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-prometheus", "http://127.0.0.1:1", "extra"},
		{"-prometheus", "http://127.0.0.1:1", "-range", "0s"},
		{"-prometheus", "http://127.0.0.1:1", "-dashboard", "/nonexistent.json"},
		{"-prometheus", "http://127.0.0.1:1", "-bogus"},
	} {
		var out, errOut bytes.Buffer
		if rc := run(args, &out, &errOut); rc != 2 {
			t.Errorf("run %v = %d, want 2 (stdout %q, stderr %q)", args, rc, out.String(), errOut.String())
		}
	}
}

// TestRunFailsWhenPrometheusIsUnreachable: every query is an error, the
// exit 1, and the report names the queries.
func TestRunFailsWhenPrometheusIsUnreachable(t *testing.T) {
	var out, errOut bytes.Buffer
	rc := run([]string{"-prometheus", "http://127.0.0.1:1", "-dashboard", "../latencytier.json"}, &out, &errOut)
	if rc != 1 || !strings.Contains(out.String(), "ERROR panel") || !strings.Contains(out.String(), "dashboard queries returned no data") {
		t.Fatalf("run = %d, want 1 and a report of the failed queries:\n%s%s", rc, out.String(), errOut.String())
	}
}
