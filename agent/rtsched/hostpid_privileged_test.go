//go:build privileged

package rtsched_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/rtsched"
)

// childPidnsEnv makes TestOtherNamespaceNamesTheGrant the child, run in a
// pid namespace of its own under the host's /proc (the agent's container
// without hostPID, whose host root's /proc is the host's procfs).
const childPidnsEnv = "LATENCYTIER_RT_PIDNS_CHILD"

// TestOtherNamespaceNamesTheGrant: in a child pid namespace the agent
// refuses to address threads, and the reason names the remedy (a profile
// granting realtime gives the agent DaemonSet hostPID); in the host's own
// namespace the same check passes.
func TestOtherNamespaceNamesTheGrant(t *testing.T) {
	root := host.New("/")
	err := rtsched.SameNamespace(root)
	if os.Getenv(childPidnsEnv) == "" {
		if err != nil {
			t.Fatalf("in the host's pid namespace: %v", err)
		}
		cmd := exec.Command("unshare", "--pid", "--fork", os.Args[0], "-test.run=^TestOtherNamespaceNamesTheGrant$", "-test.v")
		cmd.Env = append(os.Environ(), childPidnsEnv+"=1")
		out, err := cmd.CombinedOutput()
		// The child's verdict is its exit status; -test.v shows it ran.
		if err != nil || !strings.Contains(string(out), "--- PASS: TestOtherNamespaceNamesTheGrant") {
			t.Fatalf("child in its own pid namespace: %v\n%s", err, out)
		}
		return
	}
	if !errors.Is(err, rtsched.ErrOtherNamespace) {
		t.Fatalf("SameNamespace in a child pid namespace = %v, want ErrOtherNamespace", err)
	}
	for _, want := range []string{"pid namespace", "spec.realtime", "hostPID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not mention %q", err, want)
		}
	}
}
