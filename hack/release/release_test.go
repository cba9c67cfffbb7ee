package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

const (
	testVersion = "v9.9.9"
	bpfObject   = "../../agent/measure/bpf/runqlat_bpfel.o"
)

// Every platform the release builds a Go executable for: the image's two,
// and krew/latency.yaml's four for the plugin.
var (
	imageArches     = []string{"amd64", "arm64"}
	pluginPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}
)

var (
	releaseOnce sync.Once
	releaseDir  string
	releaseLog  string
	releaseErr  error
	releaseTmp  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if releaseTmp != "" {
		os.RemoveAll(releaseTmp)
	}
	os.Exit(code)
}

// fakeRelease runs release.sh once for the package with PREBUILT fakes
// (testdata/fake built for each platform, stamped with testVersion and
// embedding the committed BPF object): the real script, image tool, chart
// packaging, krew/dist.sh, SBOM, checksums and check -exec, without the
// real cross builds (minutes; make release's). It returns the directory.
func fakeRelease(t *testing.T) string {
	t.Helper()
	releaseOnce.Do(func() {
		releaseTmp, releaseErr = os.MkdirTemp("", "release-test-")
		if releaseErr != nil {
			return
		}
		pre := filepath.Join(releaseTmp, "prebuilt")
		if releaseErr = buildFakes(releaseTmp, pre); releaseErr != nil {
			return
		}
		releaseDir = filepath.Join(releaseTmp, "release")
		cmd := exec.Command("./release.sh")
		cmd.Env = append(os.Environ(), "VERSION="+testVersion, "RELEASE_DIR="+releaseDir, "PREBUILT="+pre,
			"RELEASE_URL=https://releases.example/latencytier/"+testVersion, "HOMEPAGE=https://releases.example/latencytier")
		out, err := cmd.CombinedOutput()
		releaseLog, releaseErr = string(out), err
	})
	if releaseErr != nil {
		t.Fatalf("release.sh with fakes: %v\n%s", releaseErr, releaseLog)
	}
	return releaseDir
}

// buildFakes builds testdata/fake, in a module of its own under tmp with
// the BPF object beside it, into pre/<os>_<arch>/{latencytier,kubectl-latency}.
func buildFakes(tmp, pre string) error {
	mod := filepath.Join(tmp, "fake")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return err
	}
	for dst, src := range map[string]string{"main.go": "testdata/fake/main.go", "bpf.o": bpfObject} {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(mod, dst), b, 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module fake\n\ngo 1.26\n"), 0o644); err != nil {
		return err
	}
	for _, p := range pluginPlatforms {
		goos, arch, _ := strings.Cut(p, "/")
		dir := filepath.Join(pre, goos+"_"+arch)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+testVersion, "-o", filepath.Join(dir, "kubectl-latency"), ".")
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch, "GOWORK=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			return &buildError{p, err, out}
		}
		if goos == "linux" {
			if err := copyFile(filepath.Join(dir, "kubectl-latency"), filepath.Join(dir, "latencytier")); err != nil {
				return err
			}
		}
	}
	return nil
}

type buildError struct {
	platform string
	err      error
	out      []byte
}

func (e *buildError) Error() string {
	return "building the fake for " + e.platform + ": " + e.err.Error() + "\n" + string(e.out)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// copyRelease copies the fake release into a directory of its own, for a
// test to break.
func copyRelease(t *testing.T) string {
	t.Helper()
	src := fakeRelease(t)
	dst := t.TempDir()
	names, err := releaseFiles(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		in, err := os.Open(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, n))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
	return dst
}

// check runs the checker over dir as release.sh does (without -exec) and
// returns its problems.
func check(t *testing.T, dir, version string) []string {
	t.Helper()
	obj, err := os.ReadFile(bpfObject)
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{dir: dir, version: version, arches: imageArches, bpfObject: obj}
	c.check()
	return c.problems
}

// TestReleaseAgrees: release.sh's own check passed (it ran each binary
// this machine can run: the amd64 ones, and the arm64 ones when
// qemu-aarch64 is installed), and the checker finds nothing wrong.
func TestReleaseAgrees(t *testing.T) {
	dir := fakeRelease(t)
	t.Logf("release.sh:\n%s", releaseLog)
	if p := check(t, dir, testVersion); len(p) > 0 {
		t.Fatalf("the checker finds problems in release.sh's output:\n%s", strings.Join(p, "\n"))
	}
	wantRan := []string{"latencytier version: " + testVersion, "latencytier agent --help: Usage:", "kubectl-latency version: kubectl-latency " + testVersion}
	if _, err := exec.LookPath("qemu-aarch64"); err == nil && runtime.GOARCH == "amd64" {
		wantRan = append(wantRan, "qemu-aarch64 latencytier version: "+testVersion)
	} else if os.Getenv("CI") != "" {
		t.Errorf("qemu-aarch64 is not installed (Debian's qemu-user; make deps installs it): in CI the arm64 binaries must run")
	} else {
		t.Logf("qemu-aarch64 is not installed (Debian's qemu-user; make deps installs it): the arm64 binaries were checked, not run")
	}
	for _, w := range wantRan {
		if !strings.Contains(releaseLog, "ran: "+w) {
			t.Errorf("release.sh's check did not run %q", w)
		}
	}
}

// TestCheckFindsDisagreement breaks a copy of the release one way at a
// time; the checker must name each.
func TestCheckFindsDisagreement(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		breakIt func(t *testing.T, dir string)
		want    []string
	}{{
		name:    "another version",
		version: "v9.9.10",
		want: []string{"latencytier_v9.9.10_linux_amd64.oci.tar is missing", "latencytier-9.9.10.tgz is missing",
			"latencytier_v9.9.9.oci.tar: not a file of release v9.9.10", "latency.yaml: version \"v9.9.9\", want v9.9.10"},
	}, {
		name: "a plugin archive changed after the checksums",
		breakIt: func(t *testing.T, dir string) {
			appendTo(t, filepath.Join(dir, "kubectl-latency_v9.9.9_darwin_arm64.tar.gz"), []byte{0})
		},
		want: []string{"SHA256SUMS: kubectl-latency_v9.9.9_darwin_arm64.tar.gz has sha256",
			"latency.yaml: darwin/arm64: sha256", "does not describe kubectl-latency_v9.9.9_darwin_arm64.tar.gz"},
	}, {
		name: "a file the checksums do not list",
		breakIt: func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, checksumsFile), func(s string) string {
				lines := strings.Split(s, "\n")
				return strings.Join(lines[1:], "\n")
			})
		},
		want: []string{"SHA256SUMS does not list kubectl-latency_v9.9.9_darwin_amd64.tar.gz"},
	}, {
		name: "the arm64 archive holds the amd64 image",
		breakIt: func(t *testing.T, dir string) {
			if err := copyFile(filepath.Join(dir, "latencytier_v9.9.9_linux_amd64.oci.tar"), filepath.Join(dir, "latencytier_v9.9.9_linux_arm64.oci.tar")); err != nil {
				t.Fatal(err)
			}
		},
		want: []string{"latencytier_v9.9.9_linux_arm64.oci.tar: the image is for linux/amd64",
			"latencytier_v9.9.9.oci.tar: linux/arm64 is sha256:",
			"SHA256SUMS: latencytier_v9.9.9_linux_arm64.oci.tar has sha256"},
	}, {
		name: "an extra file",
		breakIt: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		want: []string{"notes.txt: not a file of release v9.9.9", "SHA256SUMS does not list notes.txt"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyRelease(t)
			if tc.breakIt != nil {
				tc.breakIt(t, dir)
			}
			v := tc.version
			if v == "" {
				v = testVersion
			}
			problems := strings.Join(check(t, dir, v), "\n")
			for _, w := range tc.want {
				if !strings.Contains(problems, w) {
					t.Errorf("the checker does not say %q; it says:\n%s", w, problems)
				}
			}
		})
	}
}

// TestCheckWantsTheBPFObject: an image binary that does not embed the
// object the checker is given fails.
func TestCheckWantsTheBPFObject(t *testing.T) {
	dir := fakeRelease(t)
	other := make([]byte, 256)
	if _, err := rand.Read(other); err != nil {
		t.Fatal(err)
	}
	c := &checker{dir: dir, version: testVersion, arches: imageArches, bpfObject: other}
	c.check()
	got := strings.Join(c.problems, "\n")
	for _, arch := range imageArches {
		if w := "latencytier_v9.9.9_linux_" + arch + ".oci.tar:/latencytier: does not embed the BPF object"; !strings.Contains(got, w) {
			t.Errorf("the checker does not say %q; it says:\n%s", w, got)
		}
	}
}

// TestReleaseIsReproducible: a second run over the same inputs gives the
// same bytes, so a published checksum can be rebuilt.
func TestReleaseIsReproducible(t *testing.T) {
	dir := fakeRelease(t)
	again := filepath.Join(releaseTmp, "again")
	cmd := exec.Command("./release.sh")
	cmd.Env = append(os.Environ(), "VERSION="+testVersion, "RELEASE_DIR="+again, "PREBUILT="+filepath.Join(releaseTmp, "prebuilt"),
		"RELEASE_URL=https://releases.example/latencytier/"+testVersion, "HOMEPAGE=https://releases.example/latencytier")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh again: %v\n%s", err, out)
	}
	a, _ := os.ReadFile(filepath.Join(dir, checksumsFile))
	b, _ := os.ReadFile(filepath.Join(again, checksumsFile))
	if !bytes.Equal(a, b) {
		t.Errorf("two runs differ:\n%s\n---\n%s", a, b)
	}
}

func appendTo(t *testing.T, file string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func rewrite(t *testing.T, file string, f func(string) string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(f(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
}
