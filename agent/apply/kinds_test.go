package apply

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEngineImportsNoKind holds the engine to knowing no kind of setting:
// it reaches every kind through agent/access (the catalogue of kinds) and
// knob.Access, so of our agent packages it may import only those that know
// no kind. A package of one kind (sysctl, systemd, rtsched, bootargs,
// partition, cpuset, irq, ...) imported here is a kind the engine knows.
func TestEngineImportsNoKind(t *testing.T) {
	allowed := map[string]bool{"access": true, "host": true, "journal": true, "kerr": true, "knob": true, "plan": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ok := strings.CutPrefix(p, "latencytier.io/latencytier/agent/")
			if ok && !allowed[rest] {
				t.Errorf("%s imports %s: the engine must reach a kind through agent/access, not its package", f, p)
			}
		}
	}
}
