package planner

import (
	"os/exec"
	"strings"
	"testing"
)

// The planner decides; it never writes. A client in its imports (or in
// theirs) would let a decision write behind the executor's back, so the
// build of the package must not reach one.
func TestPlannerImportsNoClient(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the planner's imports: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go"}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages, expected the planner's dependency tree: %s", len(deps), out)
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("the planner depends on %s: it must decide without a client", dep)
			}
		}
		if upward(dep) {
			t.Errorf("the planner depends on %s: the bottom of controllers/ imports nothing of it back up", dep)
		}
	}
}

// upward: dep is a package of controllers/ other than the planner (the
// reconcilers, or the status aggregation that builds on the planner).
func upward(dep string) bool {
	const controllers = "latencytier.io/latencytier/controllers"
	return (dep == controllers || strings.HasPrefix(dep, controllers+"/")) && dep != controllers+"/planner"
}
