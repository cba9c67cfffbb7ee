package profilestatus

import (
	"os/exec"
	"strings"
	"testing"
)

// The status is computed from what the pass read; the profile reconciler
// writes it, in one patch. A client in this package's imports (or in
// theirs) would let the computation read or write behind the pass, and an
// import of controllers/ would run back up to the reconcilers: the build
// of the package must reach neither.
func TestProfileStatusImportsNoClient(t *testing.T) {
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
	for _, dep := range deps {
		if why := forbiddenDep(dep); why != "" {
			t.Errorf("profilestatus depends on %s: %s", dep, why)
		}
	}
}

// forbiddenDep says why dep may not be in profilestatus' build, "" when
// it may.
func forbiddenDep(dep string) string {
	for _, f := range []string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go"} {
		if dep == f || strings.HasPrefix(dep, f+"/") {
			return "it must compute without a client"
		}
	}
	if dep == "latencytier.io/latencytier/controllers" {
		return "an import running back up to the reconcilers"
	}
	return ""
}
