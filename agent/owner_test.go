package agent

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
)

// runChild runs `agent <args>` in a child process and returns its output
// and whether it exited 0.
func runChild(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	a, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LT_AGENT_CHILD="+string(a), "LT_CRASH_AT=")
	b, err := cmd.CombinedOutput()
	return string(b), err == nil
}

// While the DaemonSet agent (here this test process) owns the journal, a
// one-shot `agent apply` or `agent revert` on the node (a child process)
// refuses, names the owner and writes nothing; once the owner is gone it
// runs.
func TestCLIRefusesWhileTheAgentOwnsTheJournal(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/sys/kernel/sched_autogroup_enabled": "1\n",
		"proc/sys/kernel/osrelease": "6.6.8\n"})
	autogroup := root.Proc("sys", "kernel", "sched_autogroup_enabled")
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	testroot.Write(t, spec, "action: Apply\nprofile: cli\ntuning:\n  scheduler:\n    autogroup: Disabled\n")
	rootArg := "--host-root=" + root.Dir()

	release, err := journal.Own(root, journal.ModeAgent)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"apply", "--node-spec=" + spec, rootArg}, {"revert", rootArg}} {
		out, ok := runChild(t, args...)
		if ok {
			t.Fatalf("agent %s ran while the DaemonSet agent owns the journal:\n%s", args[0], out)
		}
		for _, want := range []string{"refused", "DaemonSet agent", "pid " + strconv.Itoa(os.Getpid()), root.StateDir()} {
			if !strings.Contains(out, want) {
				t.Errorf("agent %s output lacks %q:\n%s", args[0], want, out)
			}
		}
	}
	if got := testroot.Read(t, autogroup); got != "1" {
		t.Fatalf("autogroup = %s after a refused apply, want 1", got)
	}
	if _, err := os.Stat(journal.Path(root)); !os.IsNotExist(err) {
		t.Fatalf("refused apply wrote a journal: %v", err)
	}
	if out, ok := runChild(t, "plan", "--node-spec="+spec, rootArg); !ok {
		t.Fatalf("agent plan (read-only) refused:\n%s", out)
	}

	release()
	if out, ok := runChild(t, "apply", "--node-spec="+spec, rootArg); !ok || testroot.Read(t, autogroup) != "0" {
		t.Fatalf("agent apply after the owner left: ok=%v autogroup=%s\n%s", ok, testroot.Read(t, autogroup), out)
	}
	// A CLI killed mid-apply holds the owner lock no longer: the kernel
	// dropped it with the process, and the next command runs.
	if killed, out := runAgent(t, "written:1", "apply", "--node-spec="+spec, rootArg); killed {
		t.Fatalf("nothing to write, yet the apply was killed at its first write:\n%s", out)
	}
	testroot.Write(t, autogroup, "1")
	if killed, out := runAgent(t, "written:1", "apply", "--node-spec="+spec, rootArg); !killed {
		t.Fatalf("apply was not killed:\n%s", out)
	}
	if out, ok := runChild(t, "revert", rootArg); !ok || testroot.Read(t, autogroup) != "1" {
		t.Fatalf("revert after a killed apply: ok=%v autogroup=%s\n%s", ok, testroot.Read(t, autogroup), out)
	}
}
