package partition_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/partition"
)

// TestMain doubles as the crashing agent: with LT_PARTITION_ROOT set, the
// binary applies crashReqs to that root and SIGKILLs itself at the
// LT_PARTITION_CRASH_AT-th kernel write, as a node losing the agent pod
// mid-apply does.
func TestMain(m *testing.M) {
	dir := os.Getenv("LT_PARTITION_ROOT")
	if dir == "" {
		os.Exit(m.Run())
	}
	at, _ := strconv.Atoi(os.Getenv("LT_PARTITION_CRASH_AT"))
	root := host.New(dir)
	knobs, _ := partition.Knobs(root, partition.Probe(root, kp), crashReqs, partition.Options{Within: isolated})
	seen := 0
	e := engine(root, func(s apply.Stage, _ string) {
		if s == apply.StageWritten {
			if seen++; seen == at {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
	})
	if _, err := e.Apply(apply.Meta{Profile: "p"}, knobs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

var crashReqs = []partition.Request{
	{Cgroup: buCtr, CPUs: "2-3", Type: "isolated"},
	{Cgroup: guCtr, CPUs: "4-5", Type: "root"},
}

// An agent killed after each of the writes of an apply leaves a journal
// from which a revert restores every file exactly.
func TestCrashMidApplyThenRevertRestoresEverything(t *testing.T) {
	probe := cgroups(t, bu, buPod, buCtr, guPod, guCtr)
	writes := len(mustKnobs(t, probe, crashReqs...))
	for at := 1; at <= writes; at++ {
		t.Run(strconv.Itoa(at), func(t *testing.T) {
			root := cgroups(t, bu, buPod, buCtr, guPod, guCtr)
			before := snapshot(t, root)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "LT_PARTITION_ROOT="+root.Dir(), "LT_PARTITION_CRASH_AT="+strconv.Itoa(at))
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
				t.Fatalf("the agent was not killed at write %d: %v\n%s", at, err, out)
			}
			if _, err := engine(root, nil).Revert(); err != nil {
				t.Fatal(err)
			}
			for p, v := range snapshot(t, root) {
				if before[p] != v {
					t.Errorf("after a crash at write %d and a revert, %s = %q, want the original %q", at, p, v, before[p])
				}
			}
		})
	}
}
