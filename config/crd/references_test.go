// Package crd holds the generated CustomResourceDefinitions (make
// manifests, from api/v1alpha1); its test keeps what `kubectl explain`, the
// samples, the README, docs/, make help and every source file show a
// reader free of references they cannot follow.
package crd

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsideReferences are ways a description has cited what lives outside
// the repository: the project's field notes (also as "the note", "the
// notes", "note 004") and design cards, a sibling shared directory,
// incident numbers. A description states the reason itself instead.
var outsideReferences = regexp.MustCompile(`(?i)field[- ]notes?\b|\bthe notes?\b|\bnotes? 0[0-9]{2}\b|\.\./shared|\bshared/|/work/|` +
	`\b(DOMAIN|NOTES|DESIGN|STYLE)\.md\b|\bincident\s*#?\s*[0-9]|\bINC-?[0-9]+`)

// fileReference is a relative path a reader would look for in the
// repository (docs/knobs.md, config/agent/role.yaml); URLs are excluded.
var fileReference = regexp.MustCompile(`(?:^|[\s(\x60'"])((?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_.-]+\.(?:md|go|yaml|json|txt))\b`)

// readable are the files of the CRDs (config/crd/bases and the chart's
// copy) and the samples, relative to the repository root.
func readable(t *testing.T) map[string]string {
	return readGlobs(t, "bases/*.yaml", "../samples/*.yaml", "../../charts/latencytier/crds/*.yaml")
}

// prose are the files a reader of the repository follows besides the CRDs:
// the README, docs/*.md (some generated: knobs.md by internal/knobs,
// benchmarks.md by hack/bench/report.sh) and the Makefile, whose help
// lines make help prints.
func prose(t *testing.T) map[string]string {
	return readGlobs(t, "../../README.md", "../../docs/*.md", "../../Makefile")
}

// readGlobs reads every file the globs match, by path; a glob that
// matches nothing fails the test.
func readGlobs(t *testing.T, globs ...string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, glob := range globs {
		paths, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) == 0 {
			t.Fatalf("no files match %s", glob)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			files[p] = string(b)
		}
	}
	return files
}

// TestProseCitesNothingOutsideTheRepository: the README, the docs and the
// Makefile cite no field note, design card, shared path or incident
// number either. It failed while docs/benchmarks.md titled its sections
// "(field note 004)" and the like, docs/knobs.md grounded the allowlist in
// "the field notes" and make help said bench reproduces "the field notes'
// incidents".
func TestProseCitesNothingOutsideTheRepository(t *testing.T) {
	for path, text := range prose(t) {
		for i, line := range strings.Split(text, "\n") {
			if m := outsideReferences.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, which a reader cannot follow; state the reason instead: %s", path, i+1, m, strings.TrimSpace(line))
			}
		}
	}
}

// TestDescriptionsCiteNothingOutsideTheRepository: the CRDs' descriptions
// and CEL messages (what kubectl explain and a refused apply print) and the
// samples cite no field note, design card, shared path or incident, and
// every repository path they name exists. It failed while the scheduler
// fields and Finding cited "field note 003/004" and the samples "field
// notes 001, 002".
func TestDescriptionsCiteNothingOutsideTheRepository(t *testing.T) {
	for path, text := range readable(t) {
		for i, line := range strings.Split(text, "\n") {
			if m := outsideReferences.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, which a reader cannot follow; state the reason instead: %s", path, i+1, m, strings.TrimSpace(line))
			}
			if strings.Contains(line, "://") {
				continue
			}
			for _, m := range fileReference.FindAllStringSubmatch(line, -1) {
				if _, err := os.Stat(filepath.Join("..", "..", m[1])); err != nil {
					t.Errorf("%s:%d names %s, not in the repository: %s", path, i+1, m[1], strings.TrimSpace(line))
				}
			}
		}
	}
}

// sourceExts are the kinds of file a contributor reads in the repository
// besides prose: code and its comments, scripts, manifests, chart templates.
var sourceExts = map[string]bool{".go": true, ".sh": true, ".yaml": true, ".yml": true, ".json": true,
	".tpl": true, ".txt": true, ".md": true, ".c": true, ".h": true, ".py": true}

// sources are every such file under the repository root, by path relative
// to it, leaving out build outputs, hidden directories and this file (whose
// pattern and examples name what it looks for). Files under testdata/ are
// fixtures, not prose, and a fixture may need to hold anything.
func sources(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join("..", "..")
	files := map[string]string{}
	skipDirs := map[string]bool{"bin": true, "dist": true, "testdata": true, "out": true}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || skipDirs[name]) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if rel == filepath.Join("config", "crd", "references_test.go") || name == "vmlinux.h" {
			return nil
		}
		if !sourceExts[filepath.Ext(name)] && name != "Makefile" && name != "Dockerfile" && !isScript(p) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// isScript says p is an executable text file without an extension
// (hack/local-cluster and the like).
func isScript(p string) bool {
	info, err := os.Stat(p)
	if err != nil || info.Mode()&0o111 == 0 || filepath.Ext(p) != "" {
		return false
	}
	b, err := os.ReadFile(p)
	return err == nil && strings.HasPrefix(string(b), "#!")
}

// TestSourcesCiteNothingOutsideTheRepository: Go sources and their
// comments, scripts, the chart (templates, values, schema, NOTES.txt, its
// CRD copies), the kustomize manifests and docs cite no field note, design
// card, shared path or incident either: a contributor reading why the agent
// checks something finds the kernel reason stated where it is used. It
// failed while agent/findings, agent/rtsched and the runqlat comparison
// test cited "field note 003/004" and "the field notes' checklists", and
// hack/bench/plot.sh titled its plots "(note 004)".
func TestSourcesCiteNothingOutsideTheRepository(t *testing.T) {
	files := sources(t)
	for _, want := range []string{"agent/rtsched/findings.go", "charts/latencytier/values.yaml",
		"charts/latencytier/templates/NOTES.txt", "charts/latencytier/crds", "docs/runbooks.md", "hack/local-cluster"} {
		found := false
		for p := range files {
			if p == filepath.FromSlash(want) || strings.HasPrefix(p, filepath.FromSlash(want)+string(filepath.Separator)) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s not among the files read: the walk misses what it is for", want)
		}
	}
	for path, text := range files {
		for i, line := range strings.Split(text, "\n") {
			if m := outsideReferences.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, which a reader cannot follow; state the reason instead: %s", path, i+1, m, strings.TrimSpace(line))
			}
		}
	}
}

// TestOutsideReferencesPatternCatches: the patterns catch what they are
// for, and pass the project's own references.
func TestOutsideReferencesPatternCatches(t *testing.T) {
	for _, bad := range []string{"(field note 003)", "the field notes' checklists", "see ../shared/DOMAIN.md",
		"DESIGN.md says", "incident #42", "INC-1234", "(the note: gateway at 60 % CPU)", "like the note's gateway",
		"where the notes saw the effect", "notes 001/002"} {
		if !outsideReferences.MatchString(bad) {
			t.Errorf("%q not caught", bad)
		}
	}
	for _, good := range []string{"docs/knobs.md", "a fielded value", "sharedMemory", "the shared CPU pool",
		"the chart's NOTES.txt", "a footnote", "what it denotes", "notes on upgrading"} {
		if outsideReferences.MatchString(good) {
			t.Errorf("%q caught", good)
		}
	}
}
