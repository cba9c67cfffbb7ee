//go:build privileged

package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/internal/kernellock"
)

// Real kernel: a node spec given to `agent apply --node-spec` (what a
// LatencyNode written around the profile's admission rules carries) asking
// for a piped core_pattern is refused and the kernel's core_pattern is left
// exactly as it was. Applied, it would run /tmp/x as root on every crash.
func TestPipedCorePatternIsRefusedOnTheRealKernel(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	path := root.Proc("sys", "kernel", "core_pattern")
	testroot.Restore(t, path) // only matters if the refusal is broken
	before := testroot.Read(t, path)
	file := filepath.Join(t.TempDir(), "node.yaml")
	doc := "kind: LatencyNode\nspec:\n  profile: evil\n  tuning:\n    sysctls:\n    - name: kernel.core_pattern\n      value: \"|/tmp/x %p\"\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	t.Cleanup(func() { _ = oneShot("revert", []string{"--host-root", root.Dir()}, &bytes.Buffer{}) })
	if err := oneShot("apply", []string{"--node-spec", file, "--host-root", root.Dir()}, &out); err != nil {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	if got := testroot.Read(t, path); got != before {
		t.Errorf("core_pattern changed from %q to %q", before, got)
	}
	s := out.String()
	if !strings.Contains(s, "0 write(s)") {
		t.Errorf("kernel writes, want none:\n%s", s)
	}
	if !strings.Contains(s, "Invalid") || !strings.Contains(s, "sysctl/kernel.core_pattern") || !strings.Contains(s, "kernel.core_pattern is refused") {
		t.Errorf("output lacks sysctl/kernel.core_pattern Invalid with the reason:\n%s", s)
	}
}
