// Package doclaims owns the rule over what the documentation may claim
// about the node stack: README.md and docs/*.md name no container runtime,
// no runtime version and no Kubernetes minor that README.md's
// compatibility matrix does not list, and a runtime version only where a
// row of the matrix names the target that proves it. The README once said
// "tested: containerd 1.6 with runc" long after Kubernetes had dropped
// containerd 1.x; its test runs the rule over the repository, so
// `make test` enforces it.
package doclaims

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MatrixHeader is the header row that marks the compatibility matrix in
// README.md; its columns are, in order, the Kubernetes minor, the
// container runtime, the cgroup mode, the kernel and what proves the row.
const MatrixHeader = "| Kubernetes | Container runtime | cgroup mode | Kernel | Proven by |"

// NotTested is what a row's "Proven by" cell says when no target proves it.
const NotTested = "not tested"

// Runtime is a container runtime named in text, with the major.minor
// version that follows its name ("" for none; "1" for "1.x").
type Runtime struct {
	Name    string // canonical: containerd, cri-o, cri-dockerd, dockershim, docker engine
	Version string
}

func (r Runtime) String() string {
	if r.Version == "" {
		return r.Name
	}
	return r.Name + " " + r.Version
}

// Row is one row of the matrix.
type Row struct {
	Line                                          int // 1-based, in README.md
	Kubernetes, Runtime, Cgroup, Kernel, ProvenBy string
	Minors                                        []int // Kubernetes 1.N minors the row covers
	Runtimes                                      []Runtime
}

// Proven reports whether the row names a make target that proves it.
func (r Row) Proven() bool { return strings.Contains(r.ProvenBy, "make ") }

// Matrix is README.md's compatibility matrix.
type Matrix struct {
	Rows []Row
	// first and last line (1-based) of the table, header included: the
	// matrix is the definition, not a claim.
	first, last int
}

// runtimeRe matches a runtime's name and, when one follows it, its version
// (major.minor, "major.x", or major.minor.patch of which major.minor counts).
var runtimeRe = regexp.MustCompile(`(?i)\b(containerd|cri-o|crio|cri-dockerd|dockershim|docker\s+engine)\b(?:\s+v?(\d+)\.(\d+|x)\b)?`)

// kubeRe matches a Kubernetes minor claimed for Kubernetes or one of its
// components: "Kubernetes 1.36", "**Kubernetes**: 1.30 or later",
// "kubelet ≥1.35", "k8s v1.37".
var kubeRe = regexp.MustCompile(`(?i)\b(?:kubernetes|kubelet|kube-apiserver|k8s)\**:?\s+(?:v|≥\s*|>=\s*|≤\s*|<=\s*)?1\.(\d+)\b`)

// minorRangeRe and minorRe read the Kubernetes cell of a row: "1.37",
// "1.30–1.36" (en dash or hyphen).
var (
	minorRangeRe = regexp.MustCompile(`\b1\.(\d+)\s*[–-]\s*1\.(\d+)\b`)
	minorRe      = regexp.MustCompile(`\b1\.(\d+)\b`)
)

func canonical(name string) string {
	n := strings.Join(strings.Fields(strings.ToLower(name)), " ")
	if n == "crio" {
		return "cri-o"
	}
	return n
}

// Runtimes lists the runtimes text names, in order.
func Runtimes(text string) []Runtime {
	var out []Runtime
	for _, m := range runtimeRe.FindAllStringSubmatch(text, -1) {
		r := Runtime{Name: canonical(m[1])}
		switch {
		case m[2] == "":
		case m[3] == "x" || m[3] == "X":
			r.Version = m[2]
		default:
			r.Version = m[2] + "." + m[3]
		}
		out = append(out, r)
	}
	return out
}

func minors(cell string) []int {
	var out []int
	for _, m := range minorRangeRe.FindAllStringSubmatch(cell, -1) {
		lo, _ := strconv.Atoi(m[1])
		hi, _ := strconv.Atoi(m[2])
		for n := lo; n <= hi; n++ {
			out = append(out, n)
		}
	}
	for _, m := range minorRe.FindAllStringSubmatch(minorRangeRe.ReplaceAllString(cell, ""), -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// cells splits a Markdown table row into its trimmed cells.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	parts := strings.Split(line, "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// ParseMatrix reads the matrix out of README.md's text. Every row has its
// five cells, covers at least one Kubernetes minor or says it runs without
// a kubelet ("no kubelet"), and names a make target or says "not tested".
func ParseMatrix(readme string) (Matrix, error) {
	lines := strings.Split(readme, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == MatrixHeader })
	if start < 0 {
		return Matrix{}, fmt.Errorf("README.md has no compatibility matrix (a table with the header %q)", MatrixHeader)
	}
	m := Matrix{first: start + 1}
	i := start + 2 // past the header and its |---| line
	for ; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
		c := cells(lines[i])
		if len(c) != 5 {
			return Matrix{}, fmt.Errorf("README.md:%d: a matrix row has %d cells, want 5", i+1, len(c))
		}
		r := Row{Line: i + 1, Kubernetes: c[0], Runtime: c[1], Cgroup: c[2], Kernel: c[3], ProvenBy: c[4],
			Minors: minors(c[0]), Runtimes: Runtimes(c[1])}
		if len(r.Minors) == 0 && !strings.Contains(r.Kubernetes, "no kubelet") {
			return Matrix{}, fmt.Errorf("README.md:%d: the Kubernetes cell %q names no 1.N minor and does not say \"no kubelet\"", r.Line, r.Kubernetes)
		}
		if !r.Proven() && !strings.Contains(r.ProvenBy, NotTested) {
			return Matrix{}, fmt.Errorf("README.md:%d: the Proven-by cell %q names no make target and does not say %q", r.Line, r.ProvenBy, NotTested)
		}
		m.Rows = append(m.Rows, r)
	}
	m.last = i
	if len(m.Rows) == 0 {
		return Matrix{}, fmt.Errorf("README.md:%d: the compatibility matrix has no rows", start+1)
	}
	return m, nil
}

// lists reports whether the matrix names the runtime: a bare name in any
// row, a version only in a row that a target proves.
func (m Matrix) lists(r Runtime) bool {
	for _, row := range m.Rows {
		for _, have := range row.Runtimes {
			if have.Name != r.Name {
				continue
			}
			if r.Version == "" {
				return true
			}
			if row.Proven() && (have.Version == r.Version || strings.HasPrefix(have.Version, r.Version+".")) {
				return true
			}
		}
	}
	return false
}

func (m Matrix) listsMinor(n int) bool {
	for _, row := range m.Rows {
		if slices.Contains(row.Minors, n) {
			return true
		}
	}
	return false
}

// Check returns one problem per claim in text (the contents of file) that
// the matrix does not list. In README.md (isReadme) the matrix's own lines
// are skipped.
func (m Matrix) Check(file, text string, isReadme bool) []string {
	lineOf := func(off int) int { return strings.Count(text[:off], "\n") + 1 }
	inMatrix := func(line int) bool { return isReadme && line >= m.first && line <= m.last }
	var problems []string
	for _, loc := range runtimeRe.FindAllStringSubmatchIndex(text, -1) {
		line := lineOf(loc[0])
		if inMatrix(line) {
			continue
		}
		claim := text[loc[0]:loc[1]]
		r := Runtimes(claim)[0]
		if !m.lists(r) {
			problems = append(problems, fmt.Sprintf("%s:%d: %q claims %s, which the compatibility matrix in README.md does not list as proven",
				file, line, strings.Join(strings.Fields(claim), " "), r))
		}
	}
	for _, loc := range kubeRe.FindAllStringSubmatchIndex(text, -1) {
		line := lineOf(loc[0])
		if inMatrix(line) {
			continue
		}
		n, _ := strconv.Atoi(text[loc[2]:loc[3]])
		if !m.listsMinor(n) {
			problems = append(problems, fmt.Sprintf("%s:%d: %q claims Kubernetes 1.%d, which the compatibility matrix in README.md does not list",
				file, line, strings.Join(strings.Fields(text[loc[0]:loc[1]]), " "), n))
		}
	}
	return problems
}
