package rollout

import (
	"os/exec"
	"strings"
	"testing"
)

// The rollout decides; the profile reconciler writes its status and moves
// its nodes. A client in this package's imports (or in theirs) would let
// a decision read or write behind the pass: the build of the package must
// not reach one. (An import of controllers/, back up to the reconcilers,
// is a cycle the compiler refuses, as controllers/ imports this package.)
func TestRolloutImportsNoClient(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the package's imports: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages, expected the package's dependency tree: %s", len(deps), out)
	}
	forbidden := []string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go"}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("rollout depends on %s: it must decide without a client", dep)
			}
		}
	}
}
