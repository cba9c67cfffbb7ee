// Package krew holds the krew plugin manifest template of kubectl-latency
// and dist.sh, which builds the release archives and fills the manifest
// in (make dist-plugin); its tests check the manifest against the
// archives.
package krew

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// plugin is the part of krew's Plugin (v1alpha2) the checks read.
type plugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

const (
	releaseURL = "https://releases.example/latencytier/v9.9.9"
	homepage   = "https://releases.example/latencytier"
)

// dist runs dist.sh with env into a temp dir and returns the dir.
func dist(t *testing.T, env ...string) string {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command("./dist.sh")
	cmd.Env = append(os.Environ(), append([]string{"DIST_DIR=" + out, "RELEASE_URL=" + releaseURL, "HOMEPAGE=" + homepage}, env...)...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dist.sh: %v\n%s", err, b)
	}
	t.Logf("dist.sh:\n%s", b)
	return out
}

// fakeBuilds is a PREBUILT tree: a small executable per platform that
// says which it is.
func fakeBuilds(t *testing.T, platforms ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range platforms {
		d := filepath.Join(dir, strings.ReplaceAll(p, "/", "_"))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kubectl-latency"), []byte("#!/bin/sh\necho "+p+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// entry is one file of an archive.
type entry struct {
	mode int64
	data []byte
}

func readArchive(t *testing.T, file string) map[string]entry {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	tr := tar.NewReader(gz)
	out := map[string]entry{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[path.Clean(h.Name)] = entry{h.Mode, b}
	}
}

// checkManifest checks dir/latency.yaml against the archives in dir: one
// platform per archive, its uri the release URL and the archive's name,
// its sha256 the archive's, its bin an executable in the archive that is
// the build for its selector's os and arch (want[os/arch] is in it), next
// to kubectl_complete-latency. It returns the platforms.
func checkManifest(t *testing.T, dir, version string, want map[string]string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "latency.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p plugin
	if err := yaml.UnmarshalStrict(b, &p, yaml.DisallowUnknownFields); err != nil {
		t.Fatalf("latency.yaml: %v\n%s", err, b)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "latency" ||
		p.Spec.Version != version || p.Spec.Homepage != homepage || p.Spec.ShortDescription == "" {
		t.Errorf("manifest header: %s %s %s version %q (want %q) homepage %q (want %q)", p.APIVersion, p.Kind, p.Metadata.Name, p.Spec.Version, version, p.Spec.Homepage, homepage)
	}
	archives, _ := filepath.Glob(filepath.Join(dir, "*.tar.gz"))
	seen := map[string]bool{}
	var platforms []string
	for _, pl := range p.Spec.Platforms {
		os, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		platforms = append(platforms, os+"/"+arch)
		name := path.Base(pl.URI)
		if pl.URI != releaseURL+"/"+name || name != "kubectl-latency_"+version+"_"+os+"_"+arch+".tar.gz" {
			t.Errorf("%s/%s: uri %s", os, arch, pl.URI)
			continue
		}
		file := filepath.Join(dir, name)
		seen[file] = true
		data, err := readFile(file)
		if err != nil {
			t.Errorf("%s/%s: uri names %s, not built: %v", os, arch, name, err)
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != pl.Sha256 {
			t.Errorf("%s/%s: manifest sha256 %s, archive's %x", os, arch, pl.Sha256, sum)
		}
		files := readArchive(t, file)
		bin, ok := files[pl.Bin]
		if pl.Bin != "kubectl-latency" || !ok || bin.mode&0o111 == 0 {
			t.Errorf("%s/%s: bin %q: in the archive %v, mode %o", os, arch, pl.Bin, ok, bin.mode)
		}
		if w := want[os+"/"+arch]; !strings.Contains(string(bin.data), w) {
			t.Errorf("%s/%s: the archive's %s is not the %s build", os, arch, pl.Bin, os+"/"+arch)
		}
		if c, ok := files["kubectl_complete-latency"]; !ok || c.mode&0o111 == 0 || !strings.Contains(string(c.data), "kubectl-latency __complete") {
			t.Errorf("%s/%s: no executable kubectl_complete-latency in the archive", os, arch)
		}
	}
	for _, a := range archives {
		if !seen[a] {
			t.Errorf("%s: built, in no platform of the manifest", a)
		}
	}
	sort.Strings(platforms)
	return platforms
}

func readFile(f string) ([]byte, error) { return os.ReadFile(f) }

// TestManifestMatchesArchives packages a fake build per platform (the
// real cross builds are make dist-plugin's, minutes on a small machine)
// and checks the filled-in manifest against the archives; a second run
// gives byte-identical archives (reproducible, so the sha256 a release
// publishes can be rebuilt).
func TestManifestMatchesArchives(t *testing.T) {
	all := []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}
	want := map[string]string{}
	for _, p := range all {
		want[p] = "echo " + p
	}
	pre := fakeBuilds(t, all...)
	dir := dist(t, "VERSION=v9.9.9", "PREBUILT="+pre)
	if got := checkManifest(t, dir, "v9.9.9", want); strings.Join(got, " ") != strings.Join(all, " ") {
		t.Errorf("manifest platforms %v, want %v (linux and darwin, amd64 and arm64)", got, all)
	}
	again := dist(t, "VERSION=v9.9.9", "PREBUILT="+pre)
	a, _ := os.ReadFile(filepath.Join(dir, "kubectl-latency_v9.9.9_linux_arm64.tar.gz"))
	b, _ := os.ReadFile(filepath.Join(again, "kubectl-latency_v9.9.9_linux_arm64.tar.gz"))
	if len(a) == 0 || string(a) != string(b) {
		t.Error("two runs gave different archives: not reproducible")
	}
}

// TestManifestFailsOnAMissingPlatform: a platform of the manifest that
// was not built leaves its placeholders, and dist.sh fails instead of
// writing a manifest with them.
func TestManifestFailsOnAMissingPlatform(t *testing.T) {
	cmd := exec.Command("./dist.sh")
	cmd.Env = append(os.Environ(), "DIST_DIR="+t.TempDir(), "VERSION=v9.9.9", "PLATFORMS=linux/amd64",
		"RELEASE_URL="+releaseURL, "HOMEPAGE="+homepage, "PREBUILT="+fakeBuilds(t, "linux/amd64"))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "@URI_linux_arm64@") {
		t.Fatalf("dist.sh with linux/amd64 only: %v\n%s", err, out)
	}
}

// TestManifestNeedsItsAddresses: without RELEASE_URL or HOMEPAGE dist.sh
// fails naming the variable and writes no manifest. Both once defaulted
// to a host that served nothing, so a manifest could point krew at it.
func TestManifestNeedsItsAddresses(t *testing.T) {
	for _, missing := range []string{"RELEASE_URL", "HOMEPAGE"} {
		out := t.TempDir()
		env := []string{"DIST_DIR=" + out, "VERSION=v9.9.9", "PREBUILT=" + fakeBuilds(t, "linux/amd64")}
		for _, kv := range []string{"RELEASE_URL=" + releaseURL, "HOMEPAGE=" + homepage} {
			if !strings.HasPrefix(kv, missing+"=") {
				env = append(env, kv)
			}
		}
		cmd := exec.Command("./dist.sh")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "RELEASE_URL=") && !strings.HasPrefix(kv, "HOMEPAGE=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, env...)
		b, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(b), missing+" is required") {
			t.Errorf("dist.sh without %s: %v\n%s", missing, err, b)
		}
		if _, err := os.Stat(filepath.Join(out, "latency.yaml")); err == nil {
			t.Errorf("dist.sh without %s wrote a manifest", missing)
		}
	}
}

// TestManifestVersionIsSemver: krew wants vMAJOR.MINOR.PATCH; git
// describe's output becomes a prerelease of v0.0.0.
func TestManifestVersionIsSemver(t *testing.T) {
	all := []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}
	dir := dist(t, "VERSION=6546831-dirty", "PREBUILT="+fakeBuilds(t, all...))
	checkManifest(t, dir, "v0.0.0-6546831-dirty", map[string]string{})
}

// TestRealBuildRuns: dist.sh builds the real plugin for this machine's
// platform (the others from fakes) and the archive's binary runs and
// reports the version dist.sh was given.
func TestRealBuildRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real build compiles the plugin from scratch once (-trimpath), minutes on a small machine")
	}
	host := runtime.GOOS + "/" + runtime.GOARCH
	var others []string
	for _, p := range []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"} {
		if p != host {
			others = append(others, p)
		}
	}
	dir := dist(t, "VERSION=v9.9.9", "PREBUILT="+fakeBuilds(t, others...))
	checkManifest(t, dir, "v9.9.9", map[string]string{host: "kubectl-latency"})
	files := readArchive(t, filepath.Join(dir, "kubectl-latency_v9.9.9_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz"))
	bin := filepath.Join(t.TempDir(), "kubectl-latency")
	if err := os.WriteFile(bin, files["kubectl-latency"].data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "kubectl-latency v9.9.9 (") {
		t.Fatalf("the archive's kubectl-latency version: %v\n%s", err, out)
	}
}
