//go:build privileged

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/internal/kernellock"
	"latencytier.io/latencytier/internal/privtest"
)

// Kill the agent between journal and first write, after some writes, and
// during a revert; a restarted agent (apply again, or revert) must leave the
// kernel byte-identical to before the first apply.
func TestCrashSafety(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	spec := crashSpec(t)
	before := testroot.Snapshot(t)
	restoreAll(t, before)
	mountsBefore := mounts(t)
	rootArg := "--host-root=" + root.Dir()
	check := func(t *testing.T) {
		t.Helper()
		if d := testroot.Diff(before, testroot.Snapshot(t)); len(d) != 0 {
			t.Fatalf("kernel differs from before the first apply:\n%s", strings.Join(d, "\n"))
		}
		if m := mounts(t); m != mountsBefore {
			t.Fatalf("mounts differ from before the first apply (debugfs left mounted?):\n%s\nwas:\n%s", m, mountsBefore)
		}
		if _, err := os.Stat(journal.Path(root)); !os.IsNotExist(err) {
			t.Fatalf("journal left after a complete revert: %v", err)
		}
	}
	cases := []struct {
		name    string
		crashAt string
		restart bool // apply again before reverting
	}{
		{name: "between journal and write", crashAt: "journaled:1"},
		{name: "after the first write", crashAt: "written:1"},
		{name: "mid-apply, restarted then reverted", crashAt: "written:6", restart: true},
		{name: "between journal and write, restarted", crashAt: "journaled:1", restart: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			killed, out := runAgent(t, tc.crashAt, "apply", "--node-spec="+spec, rootArg)
			if !killed {
				t.Fatalf("agent was not killed at %s:\n%s", tc.crashAt, out)
			}
			if _, err := journal.Load(root); err != nil {
				t.Fatalf("journal after the crash: %v", err)
			}
			if tc.restart {
				runAgent(t, "", "apply", "--node-spec="+spec, rootArg)
				if d := testroot.Diff(before, testroot.Snapshot(t)); len(d) < 2 {
					t.Fatalf("restarted apply changed too little: %v", d)
				}
			}
			runAgent(t, "", "revert", rootArg)
			check(t)
		})
	}
	t.Run("mid-revert", func(t *testing.T) {
		runAgent(t, "", "apply", "--node-spec="+spec, rootArg)
		if killed, out := runAgent(t, "restored:2", "revert", rootArg); !killed {
			t.Fatalf("revert was not killed:\n%s", out)
		}
		runAgent(t, "", "revert", rootArg)
		check(t)
	})
}

func crashSpec(t *testing.T) string {
	t.Helper()
	ag, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled")
	if err != nil {
		privtest.Missing(t, "no autogroup sysctl")
	}
	flip := map[string]string{"0": "Enabled", "1": "Disabled"}[strings.TrimSpace(string(ag))]
	spec := fmt.Sprintf(`action: Apply
profile: crash
tuning:
  scheduler:
    autogroup: %s
    rtRuntime: 900ms
  cpus:
    reserved: "1"
  irq:
    affinity: Reserved
`, flip)
	path := filepath.Join(t.TempDir(), "spec.yaml")
	testroot.Write(t, path, spec)
	return path
}

func restoreAll(t *testing.T, snap map[string]string) {
	t.Cleanup(func() {
		for p, v := range snap {
			cur, err := os.ReadFile(p)
			if err != nil || string(cur) == v {
				continue
			}
			if err := os.WriteFile(p, []byte(strings.TrimSpace(v)), 0); err != nil && !strings.Contains(p, "/irq/36/") {
				t.Logf("restore %s: %v", p, err)
			}
		}
	})
}

// mounts lists the debugfs mount points this process sees.
func mounts(t *testing.T) string {
	return strings.Join(testroot.Mounts(t, "debugfs"), "\n")
}
