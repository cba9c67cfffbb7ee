package controllers

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// controllersPkg is the import path of this package; the packages by role
// are below it.
const controllersPkg = "latencytier.io/latencytier/controllers"

// depsOf lists every package the build of ./pkg depends on (go list -deps).
func depsOf(t *testing.T, pkg string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages' imports: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "./"+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./%s: %v\n%s", pkg, err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages for %s, expected its dependency tree: %s", len(deps), pkg, out)
	}
	return deps
}

// The pure packages of controllers/ decide and compute; the reconcilers
// here read, and the executor writes. A client in a pure package's imports
// (or in theirs) would let a decision read or write behind the pass, so
// the build of each must not reach one.
func TestPurePackagesImportNoClient(t *testing.T) {
	forbidden := []string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go"}
	for _, pkg := range []string{"planner", "profilestatus", "rollout"} {
		for _, dep := range depsOf(t, pkg) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s depends on %s: it must decide without a client", pkg, dep)
				}
			}
		}
	}
}

// layersBelow are the packages of controllers/ by role, each with the
// packages of controllers/ it may build on: only ones below it. An import
// back up (the executor reaching a decision's package above it, the
// planner reaching any) fails here; one of controllers/ itself from any of
// them is a cycle the compiler refuses.
var layersBelow = map[string][]string{
	"executor":      {"planner"},
	"rollout":       {"profilestatus", "planner"},
	"profilestatus": {"planner"},
	"planner":       nil,
}

// TestNoImportRunsBackUp: each package of controllers/ depends only on
// the ones below it (layersBelow), and every package of controllers/ is in
// the table, so a new one is placed before it is built on.
func TestNoImportRunsBackUp(t *testing.T) {
	for pkg, below := range layersBelow {
		for _, dep := range depsOf(t, pkg) {
			sub, ok := strings.CutPrefix(dep, controllersPkg+"/")
			if !ok || sub == pkg {
				continue
			}
			if !slices.Contains(below, sub) {
				t.Errorf("%s depends on controllers/%s, which is not below it: no import runs back up (layersBelow)", pkg, sub)
			}
		}
	}
	for _, dep := range depsOf(t, ".") {
		if sub, ok := strings.CutPrefix(dep, controllersPkg+"/"); ok {
			if _, placed := layersBelow[sub]; !placed {
				t.Errorf("controllers/%s is in no layer of layersBelow", sub)
			}
		}
	}
}
