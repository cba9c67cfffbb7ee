//go:build privileged

package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/internal/kernellock"
)

// forgedSpec writes a node spec (what a LatencyNode written around the
// profile's admission policy carries) asking for one raw sysctl.
func forgedSpec(t *testing.T, name, value string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "node.yaml")
	doc := "kind: LatencyNode\nspec:\n  profile: forged\n  tuning:\n    sysctls:\n    - name: " + name + "\n      value: \"" + value + "\"\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// otherValue is a value of a 0/1 switch that differs from the current one.
func otherValue(t *testing.T, path string) (before, other string) {
	t.Helper()
	before = testroot.Read(t, path)
	if before == "0" {
		return before, "1"
	}
	return before, "0"
}

func applyCLI(t *testing.T, root *host.Root, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	t.Cleanup(func() { _ = oneShot("revert", []string{"--host-root", root.Dir()}, &bytes.Buffer{}) })
	if err := oneShot("apply", append([]string{"--host-root", root.Dir()}, args...), &out); err != nil {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	return out.String()
}

// Real kernel: vm.panic_on_oom is on no allowlist; a node spec carrying it
// (the agent never trusts its LatencyNode for this) is reported Invalid,
// naming the sysctl and the unlock, and the kernel value is left as it was.
func TestUnallowedSysctlIsInvalidOnTheRealKernel(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	path := root.Proc("sys", "vm", "panic_on_oom")
	testroot.Restore(t, path) // only matters if the refusal is broken
	before, other := otherValue(t, path)
	out := applyCLI(t, root, "--node-spec", forgedSpec(t, "vm.panic_on_oom", other))
	if got := testroot.Read(t, path); got != before {
		t.Errorf("vm.panic_on_oom changed from %q to %q", before, got)
	}
	if !strings.Contains(out, "0 write(s)") {
		t.Errorf("kernel writes, want none:\n%s", out)
	}
	if !strings.Contains(out, "Invalid") || !strings.Contains(out, "sysctl/vm.panic_on_oom") || !strings.Contains(out, "latencytier-sysctls") {
		t.Errorf("output lacks sysctl/vm.panic_on_oom Invalid naming the unlock:\n%s", out)
	}
}

// adminFile is the admin's ConfigMap key as the agent's volume holds it.
func adminFile(t *testing.T, list string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "allowedSysctls")
	if err := os.WriteFile(file, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// Real kernel: a sysctl the admin unlocked is applied; once the admin
// removes it, the next apply restores the kernel's original (the journal
// holds it, and the spec no longer yields a knob for it).
func TestUnlockedSysctlIsAppliedAndRevokedOnTheRealKernel(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	path := root.Proc("sys", "vm", "oom_dump_tasks")
	testroot.Restore(t, path)
	before, other := otherValue(t, path)
	spec := forgedSpec(t, "vm.oom_dump_tasks", other)
	out := applyCLI(t, root, "--node-spec", spec, "--allowed-sysctls-file", adminFile(t, "vm.panic_on_oom,\nvm.oom_*\n"))
	if got := testroot.Read(t, path); got != other {
		t.Fatalf("unlocked vm.oom_dump_tasks = %q, want %q:\n%s", got, other, out)
	}
	out = applyCLI(t, root, "--node-spec", spec, "--allowed-sysctls-file", adminFile(t, "vm.panic_on_oom"))
	if got := testroot.Read(t, path); got != before {
		t.Errorf("revoked vm.oom_dump_tasks = %q, want the original %q restored:\n%s", got, before, out)
	}
	if !strings.Contains(out, "sysctl vm.oom_dump_tasks is not on the built-in allowlist") {
		t.Errorf("output does not say why vm.oom_dump_tasks is no longer applied:\n%s", out)
	}
}

// Real kernel: what runs code stays refused even when the admin's list
// names it, exactly or by prefix.
func TestCorePatternIsRefusedEvenWhenUnlockedOnTheRealKernel(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	path := root.Proc("sys", "kernel", "core_pattern")
	testroot.Restore(t, path)
	before := testroot.Read(t, path)
	out := applyCLI(t, root, "--node-spec", forgedSpec(t, "kernel.core_pattern", "|/tmp/x %p"),
		"--allowed-sysctls-file", adminFile(t, "kernel.core_pattern,kernel.*"))
	if got := testroot.Read(t, path); got != before {
		t.Errorf("core_pattern changed from %q to %q", before, got)
	}
	if !strings.Contains(out, "0 write(s)") || !strings.Contains(out, "kernel.core_pattern is refused") {
		t.Errorf("want no write and the refusal:\n%s", out)
	}
}
