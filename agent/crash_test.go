package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"latencytier.io/latencytier/agent/apply"
)

// The crash-safety test re-executes this test binary as the agent: with
// LT_AGENT_CHILD set, TestMain runs `agent <args>` and SIGKILLs itself at the
// n-th occurrence of a stage (LT_CRASH_AT=stage:n), like a node losing the
// agent pod mid-apply.
func TestMain(m *testing.M) {
	if os.Getenv("LT_AGENT_CHILD") == "" {
		os.Exit(m.Run())
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv("LT_AGENT_CHILD")), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if at := os.Getenv("LT_CRASH_AT"); at != "" {
		stage, n, _ := strings.Cut(at, ":")
		want, _ := strconv.Atoi(n)
		seen := 0
		crashHook = func(s apply.Stage, _ string) {
			if string(s) == stage {
				if seen++; seen == want {
					_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {}
				}
			}
		}
	}
	if err := Main(context.Background(), args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runAgent runs the agent subprocess; crashAt "" runs it to completion.
func runAgent(t *testing.T, crashAt string, args ...string) (killed bool, out string) {
	t.Helper()
	a, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LT_AGENT_CHILD="+string(a), "LT_CRASH_AT="+crashAt)
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, string(b)
		}
	}
	if err != nil {
		t.Fatalf("agent %v: %v\n%s", args, err, b)
	}
	return false, string(b)
}
