//go:build privileged

package facts

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
)

func TestReadThisMachine(t *testing.T) {
	root := testroot.RealKernel(t)
	f := Read(root, true, false)
	if f.Version == "" || f.OnlineCPUs == "" || f.CgroupMode == "" {
		t.Fatalf("facts = %+v", f)
	}
	t.Logf("facts: %+v", f)
}

// Real processes: a copy of sleep installed at the root's
// /usr/sbin/irqbalance is irqbalance; the same binary copied anywhere else
// and run (its comm is "irqbalance" too, as a tenant's would be) is not.
func TestIRQBalanceIsTheHostBinaryNotTheName(t *testing.T) {
	root := testroot.RealKernel(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	start := func(path string) int {
		t.Helper()
		b, err := os.ReadFile(sleep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(path, "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	real := start(root.Path("usr", "sbin", "irqbalance"))
	fake := start(filepath.Join(t.TempDir(), "irqbalance"))
	for _, pid := range []int{real, fake} {
		if comm := testroot.Read(t, root.Proc(strconv.Itoa(pid), "comm")); comm != "irqbalance" {
			t.Fatalf("pid %d comm = %q", pid, comm)
		}
	}
	var found []int
	for _, b := range IRQBalances(root) {
		found = append(found, b.PID)
	}
	if !slices.Contains(found, real) || slices.Contains(found, fake) {
		t.Fatalf("IRQBalances found pids %v; want %d (the root's binary), not %d (a renamed copy)", found, real, fake)
	}
}
