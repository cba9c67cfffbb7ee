package repofiles

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRepositoryTracksNoBuildOutputOrLargeFile: the rule over this
// repository. It would have failed on cmd/kubectl-latency/kubectl-latency,
// a 72 MB unstripped binary once committed.
func TestRepositoryTracksNoBuildOutputOrLargeFile(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed to list the tracked files: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skipf("%s is not a git work tree (a source archive): %v", root, err)
	}
	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// elfHeader is the first 18 bytes of a little-endian 64-bit ELF file of
// type typ, enough for the check.
func elfHeader(typ elf.Type) []byte {
	b := make([]byte, 64)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	b[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	b[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint16(b[elf.EI_NIDENT:], uint16(typ))
	return b
}

// TestCheckCatches: in a scratch git repository, a 1.1 MB file, an ELF
// executable, a big-endian shared object fail; a 1.1 MB file under
// testdata, vmlinux.h, a BPF object (relocatable), a file of exactly
// 1 MB, an untracked big file and a short file starting like ELF pass.
func TestCheckCatches(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q")
	big := make([]byte, 1100*1024)
	bigEndianSO := elfHeader(elf.ET_DYN)
	bigEndianSO[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
	binary.BigEndian.PutUint16(bigEndianSO[elf.EI_NIDENT:], uint16(elf.ET_DYN))
	files := map[string][]byte{
		"docs/big.bin":                   big,
		"cmd/tool/tool":                  elfHeader(elf.ET_EXEC),
		"lib/libx.so":                    bigEndianSO,
		"agent/x/testdata/big.bin":       big,
		"testdata/big.bin":               big,
		"agent/measure/bpf/vmlinux.h":    big,
		"agent/measure/bpf/runq_bpfel.o": elfHeader(elf.ET_REL),
		"exactly1mb":                     make([]byte, MaxSize),
		"short":                          []byte(elf.ELFMAG + "\x02"),
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", ".")
	if err := os.WriteFile(filepath.Join(dir, "untracked.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	problems, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	var flagged []string
	for _, p := range problems {
		flagged = append(flagged, strings.SplitN(p, ":", 2)[0])
	}
	slices.Sort(flagged)
	if want := []string{"cmd/tool/tool", "docs/big.bin", "lib/libx.so"}; !slices.Equal(flagged, want) {
		t.Errorf("Check flagged %q, want %q; problems:\n%s", flagged, want, strings.Join(problems, "\n"))
	}
}

// TestCheckOutsideGitFails: outside a work tree the rule reports an error
// rather than passing with nothing listed.
func TestCheckOutsideGitFails(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
	if _, err := Check(dir); err == nil {
		t.Error("Check outside a git work tree returned no error")
	}
}

// TestRepositoryNamesNoDeadHost: no tracked file names a URL on the
// project's own domain, which serves nothing. It failed on every alert's
// runbook_url, Chart.yaml's home and sources and the krew manifest's
// homepage and release URL.
func TestRepositoryNamesNoDeadHost(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skipf("%s is not a git work tree (a source archive): %v", root, err)
	}
	problems, err := DeadHostURLs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestDeadHostURLMatches: URLs on the host or a subdomain match, in any
// scheme; the API group, label keys and the import path, which name it
// without a scheme, do not.
func TestDeadHostURLMatches(t *testing.T) {
	host := "latencytier" + ".io"
	for line, want := range map[string]bool{
		"home: https://" + host:                                   true,
		"runbook_url: https://" + host + "/x/blob/main/docs/a.md": true,
		"homepage: http://www." + host + "/":                      true,
		"uri: https://tuning." + host + "/v1":                     true,
		"apiVersion: tuning." + host + "/v1alpha1":                false,
		"labels: {" + host + "/profile: gateway}":                 false,
		"module " + host + "/latencytier":                         false,
		"https://example.com/" + host:                             false,
		"https://" + host + "x.com/":                              false,
	} {
		if got := deadHostURL.MatchString(line); got != want {
			t.Errorf("%q: matched %v, want %v", line, got, want)
		}
	}
}
