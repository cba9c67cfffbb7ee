package doclaims

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDocsClaimOnlyWhatTheMatrixLists: the rule over this repository's
// README.md and docs/*.md. It failed on "tested: containerd 1.6 with runc"
// in README.md's prerequisites.
func TestDocsClaimOnlyWhatTheMatrixLists(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMatrix(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found")
	}
	problems := m.Check("README.md", string(readme), true)
	for _, d := range docs {
		b, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		problems = append(problems, m.Check("docs/"+filepath.Base(d), string(b), false)...)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

const sample = `# x

` + MatrixHeader + `
|---|---|---|---|---|
| 1.37 | containerd 2.4 (hack/node-runtime.sh: 2.4.2) | v1 hybrid | 6.18 | ` + "`make test-e2e`" + ` |
| — (agent only, no kubelet) | none | v2 | Debian 6.1 | ` + "`make test-kernels`" + ` |
| 1.30–1.36 | containerd 2.4 | any | any | not tested |
| 1.37 | CRI-O, containerd 1.7 | any | any | not tested |

After the table.
`

// TestParseMatrix: rows, their Kubernetes minors (a range expanded),
// their runtimes and whether a target proves them.
func TestParseMatrix(t *testing.T) {
	m, err := ParseMatrix(sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Rows) != 4 {
		t.Fatalf("%d rows, want 4: %+v", len(m.Rows), m.Rows)
	}
	if got := m.Rows[0]; !slices.Equal(got.Minors, []int{37}) || !got.Proven() || got.Line != 5 ||
		!slices.Equal(got.Runtimes, []Runtime{{"containerd", "2.4"}}) {
		t.Errorf("row 0: %+v", got)
	}
	if got := m.Rows[1]; len(got.Minors) != 0 || !got.Proven() {
		t.Errorf("row 1 (no kubelet): %+v", got)
	}
	if got := m.Rows[2]; !slices.Equal(got.Minors, []int{30, 31, 32, 33, 34, 35, 36}) || got.Proven() {
		t.Errorf("row 2 (a range, not tested): %+v", got)
	}
	if got := m.Rows[3]; !slices.Equal(got.Runtimes, []Runtime{{"cri-o", ""}, {"containerd", "1.7"}}) {
		t.Errorf("row 3 runtimes: %+v", got.Runtimes)
	}
}

// TestParseMatrixRefuses: no matrix, a row without its five cells, a row
// that names neither a target nor "not tested", a row with no minor that
// does not say it runs without a kubelet.
func TestParseMatrixRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"no matrix":    {"# README\n\ntested: containerd 1.6\n", "no compatibility matrix"},
		"four cells":   {MatrixHeader + "\n|-|\n| 1.37 | containerd 2.4 | v2 | 6.12 |\n", "4 cells"},
		"no proof":     {MatrixHeader + "\n|-|\n| 1.37 | containerd 2.4 | v2 | 6.12 | CI |\n", "names no make target"},
		"no minor":     {MatrixHeader + "\n|-|\n| latest | containerd 2.4 | v2 | 6.12 | `make test-e2e` |\n", "names no 1.N minor"},
		"no rows":      {MatrixHeader + "\n|-|\n\ntext\n", "no rows"},
		"header moved": {strings.Replace(sample, "| Proven by |", "| Proof |", 1), "no compatibility matrix"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseMatrix(tc.text)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestCheck: what the rule lets through and what it names, with the line.
func TestCheck(t *testing.T) {
	m, err := ParseMatrix(sample)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		text string
		want []string // substrings, one per problem, in order; none for a pass
	}{
		"the old README's claim, across a line break": {
			"**Nodes**: Linux (tested: containerd 1.6\nwith runc).", []string{`doc.md:1: "containerd 1.6" claims containerd 1.6`}},
		"a patch release of a proven minor":  {"runs containerd 2.4.2 with NRI", nil},
		"a v-prefixed proven minor":          {"containerd v2.4 and runc", nil},
		"a bare runtime name":                {"containerd's socket, cri-containerd-<id>.scope", nil},
		"a listed, untested runtime":         {"CRI-O's cpu-c-states annotation; crio", nil},
		"a version listed only as untested":  {"\n\nproven on containerd 1.7", []string{`doc.md:3: "containerd 1.7"`}},
		"a major.x version":                  {"containerd 1.x", []string{"claims containerd 1,"}},
		"an unlisted runtime":                {"cri-dockerd works", []string{`"cri-dockerd" claims cri-dockerd`}},
		"a listed Kubernetes minor in range": {"kubelet ≥1.35 needs failCgroupV1: false; Kubernetes 1.30+", nil},
		"the bold Kubernetes prerequisite":   {"**Kubernetes**: 1.29 or later", []string{"claims Kubernetes 1.29"}},
		"an unlisted Kubernetes minor":       {"tested on Kubernetes v1.38 and k8s 1.37", []string{`"Kubernetes v1.38" claims Kubernetes 1.38`}},
		"a bare version is no claim":         {"helm lint --kube-version 1.25.0", nil},
	} {
		t.Run(name, func(t *testing.T) {
			got := m.Check("doc.md", tc.text, false)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// TestCheckSkipsTheMatrixInREADME: the matrix's own untested rows are
// definitions, not claims; the same text elsewhere in README.md is a claim.
func TestCheckSkipsTheMatrixInREADME(t *testing.T) {
	m, err := ParseMatrix(sample)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Check("README.md", sample, true); len(got) != 0 {
		t.Fatalf("the matrix itself: %q", got)
	}
	got := m.Check("README.md", sample+"Tested on containerd 1.7.\n", true)
	if len(got) != 1 || !strings.Contains(got[0], "README.md:11:") {
		t.Fatalf("a claim after the matrix: %q", got)
	}
}
