package controllers

import (
	"os/exec"
	"strings"
	"testing"
)

// The pure packages of controllers/ decide and compute; the reconcilers
// here read and write. A client in a pure package's imports (or in theirs)
// would let a decision read or write behind the pass, so the build of each
// must not reach one. The planner, the bottom layer, also imports nothing
// of controllers/ back up. (An import of controllers/ itself from any of
// them is a cycle the compiler refuses.)
func TestPurePackagesImportNoClient(t *testing.T) {
	const controllers = "latencytier.io/latencytier/controllers"
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages' imports: %v", err)
	}
	forbidden := []string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go"}
	for _, pkg := range []string{"planner", "profilestatus", "rollout"} {
		out, err := exec.Command(goBin, "list", "-deps", "./"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps listed %d packages for %s, expected its dependency tree: %s", len(deps), pkg, out)
		}
		for _, dep := range deps {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s depends on %s: it must decide without a client", pkg, dep)
				}
			}
			if pkg == "planner" && strings.HasPrefix(dep, controllers+"/") && dep != controllers+"/planner" {
				t.Errorf("planner depends on %s: the bottom of controllers/ imports nothing of it back up", dep)
			}
		}
	}
}
