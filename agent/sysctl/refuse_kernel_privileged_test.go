//go:build privileged

package sysctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/loop"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

// Real kernel: a node spec (what `agent apply --node-spec` reads, and what a
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
	spec, err := loop.LoadSpecFile(file)
	if err != nil {
		t.Fatal(err)
	}
	st := desired.Render(root, sysctl.Layout{}, spec.Tuning, nil)
	eng := &apply.Engine{Root: root, Log: logr.Discard()}
	t.Cleanup(func() { _, _ = eng.Revert() })
	rep, err := eng.Apply(apply.Meta{Profile: spec.Profile}, st.Knobs)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got := testroot.Read(t, path); got != before {
		t.Errorf("core_pattern changed from %q to %q", before, got)
	}
	if rep.Written != 0 {
		t.Errorf("%d kernel writes, want none", rep.Written)
	}
	var found bool
	for _, r := range st.Results {
		if r.Setting == "sysctl/kernel.core_pattern" {
			found = r.State == v1alpha1.SettingInvalid && strings.Contains(r.Message, "kernel.core_pattern is refused")
		}
	}
	if !found {
		t.Errorf("results = %+v, want sysctl/kernel.core_pattern Invalid with the reason", st.Results)
	}
}
