package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/internal/ociarchive"
)

// versionLabel is the image label that carries the release's version
// (the Dockerfile's LABEL, hack/image's -label).
const versionLabel = "org.opencontainers.image.version"

var semverRe = regexp.MustCompile(`^v(\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?)$`)

// checker checks that a release directory's pieces agree with each other
// and with the version: every problem is collected, none stops the check.
type checker struct {
	dir, version string
	arches       []string
	bpfObject    []byte // the committed BPF object each image binary must embed; nil skips
	exec         bool   // run the binaries: the host's, and arm64 under qemu-aarch64 when installed
	imagesOnly   bool   // the directory holds only the image archives and their index (make image)
	qemu         string // qemu-aarch64's path, "" if absent
	problems     []string
	ran          []string // what -exec ran, for the report
}

func (c *checker) errorf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func runCheck(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	version := fs.String("version", "", "the release's version, vX.Y.Z")
	arches := fs.String("arches", "amd64,arm64", "the image's architectures")
	bpf := fs.String("bpf-object", "", "the BPF object every image binary must embed (agent/measure/bpf/runqlat_bpfel.o)")
	run := fs.Bool("exec", false, "run each binary's version (the host's directly, arm64 under qemu-aarch64 if installed) and the image's agent --help")
	imagesOnly := fs.Bool("images-only", false, "check only the image archives and their index (make image)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("check: want the release directory")
	}
	c := &checker{dir: fs.Arg(0), version: *version, arches: strings.Split(*arches, ","), exec: *run, imagesOnly: *imagesOnly}
	if *bpf != "" {
		var err error
		if c.bpfObject, err = os.ReadFile(*bpf); err != nil {
			return err
		}
	}
	if *run {
		c.qemu, _ = exec.LookPath("qemu-aarch64")
	}
	c.check()
	for _, r := range c.ran {
		fmt.Println("ran:", r)
	}
	if len(c.problems) > 0 {
		return fmt.Errorf("check: %s does not hold a consistent release %s:\n  %s", c.dir, c.version, strings.Join(c.problems, "\n  "))
	}
	fmt.Printf("check: %s is release %s: versions, digests and checksums agree\n", c.dir, c.version)
	return nil
}

// check runs every check.
func (c *checker) check() {
	m := semverRe.FindStringSubmatch(c.version)
	if m == nil {
		c.errorf("version %q is not vMAJOR.MINOR.PATCH[-PRERELEASE]", c.version)
		return
	}
	digests := map[string]v1.Hash{}
	for _, arch := range c.arches {
		if d, ok := c.checkImage(arch); ok {
			digests[arch] = d
		}
	}
	c.checkIndex(digests)
	if c.imagesOnly {
		c.checkBinaries()
		return
	}
	c.checkFiles()
	c.checkChecksums()
	c.checkChart(m[1])
	c.checkKrew()
	c.checkBinaries()
	c.checkSBOM()
}

// wantFiles are the files a release holds besides the plugin archives
// (which the krew manifest lists).
func (c *checker) wantFiles() []string {
	want := []string{checksumsFile, krewManifest, sbomFile(c.version), "latencytier_" + c.version + ".oci.tar",
		"latencytier-" + strings.TrimPrefix(c.version, "v") + ".tgz"}
	for _, a := range c.arches {
		want = append(want, "latencytier_"+c.version+"_linux_"+a+".oci.tar")
	}
	return want
}

// checkFiles: every expected file is there, and nothing else but plugin
// archives of this version.
func (c *checker) checkFiles() {
	names, err := releaseFiles(c.dir)
	if err != nil {
		c.errorf("%v", err)
		return
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	for _, w := range c.wantFiles() {
		if !have[w] {
			c.errorf("%s is missing", w)
		}
		delete(have, w)
	}
	for n := range have {
		if m := pluginArchiveRe.FindStringSubmatch(n); m == nil || m[1] != c.version {
			c.errorf("%s: not a file of release %s", n, c.version)
		}
	}
}

var sumLineRe = regexp.MustCompile(`^([0-9a-f]{64})  ([^/\s]+)$`)

// checkChecksums: SHA256SUMS (sha256sum's format) names every other file
// once, with its sha256.
func (c *checker) checkChecksums() {
	b, err := os.ReadFile(filepath.Join(c.dir, checksumsFile))
	if err != nil {
		c.errorf("%v", err)
		return
	}
	listed := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		m := sumLineRe.FindStringSubmatch(sc.Text())
		if m == nil {
			c.errorf("%s: line %q is not \"<sha256>  <file>\"", checksumsFile, sc.Text())
			continue
		}
		if listed[m[2]] {
			c.errorf("%s lists %s twice", checksumsFile, m[2])
		}
		listed[m[2]] = true
		sum, err := fileSHA256(filepath.Join(c.dir, m[2]))
		if err != nil {
			c.errorf("%s lists %s: %v", checksumsFile, m[2], err)
		} else if sum != m[1] {
			c.errorf("%s: %s has sha256 %s, the file %s", checksumsFile, m[2], m[1], sum)
		}
	}
	names, _ := releaseFiles(c.dir)
	for _, n := range names {
		if n != checksumsFile && !listed[n] {
			c.errorf("%s does not list %s", checksumsFile, n)
		}
	}
}

// elfMachine is the ELF machine of each GOARCH a release builds for Linux.
var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkImage checks the image archive of arch and returns its manifest's
// digest.
func (c *checker) checkImage(arch string) (v1.Hash, bool) {
	file := filepath.Join(c.dir, "latencytier_"+c.version+"_linux_"+arch+".oci.tar")
	if _, err := os.Stat(file); err != nil {
		if c.imagesOnly {
			c.errorf("%v", err)
		}
		return v1.Hash{}, false // else checkFiles says so
	}
	a, img, cf, err := imageOf(file)
	if err != nil {
		c.errorf("%v", err)
		return v1.Hash{}, false
	}
	defer a.Close()
	name := filepath.Base(file)
	if err := validate.Image(img); err != nil {
		c.errorf("%s: the image's blobs do not match their digests: %v", name, err)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		c.errorf("%s: manifest media type %s, want %s", name, mt, types.OCIManifestSchema1)
	}
	if cf.OS != "linux" || cf.Architecture != arch {
		c.errorf("%s: the image is for %s/%s", name, cf.OS, cf.Architecture)
	}
	if v := cf.Config.Labels[versionLabel]; v != c.version {
		c.errorf("%s: label %s=%q, want %s", name, versionLabel, v, c.version)
	}
	im, _ := a.Index.IndexManifest()
	if tag := im.Manifests[0].Annotations[ociarchive.RefNameAnnotation]; tag != c.version {
		c.errorf("%s: tagged %q in index.json, want %s", name, tag, c.version)
	}
	d, err := img.Digest()
	if err != nil {
		c.errorf("%s: %v", name, err)
		return v1.Hash{}, false
	}
	return d, true
}

// checkIndex: the multi-arch archive holds one OCI image index, tagged
// with the version, whose manifests are exactly the per-architecture
// images (same digests), each with its platform.
func (c *checker) checkIndex(digests map[string]v1.Hash) {
	name := "latencytier_" + c.version + ".oci.tar"
	file := filepath.Join(c.dir, name)
	if _, err := os.Stat(file); err != nil {
		return
	}
	a, err := ociarchive.Open(file)
	if err != nil {
		c.errorf("%v", err)
		return
	}
	defer a.Close()
	top, err := a.Index.IndexManifest()
	if err != nil || len(top.Manifests) != 1 || top.Manifests[0].MediaType != types.OCIImageIndex {
		c.errorf("%s: index.json should list one OCI image index (%v)", name, err)
		return
	}
	if tag := top.Manifests[0].Annotations[ociarchive.RefNameAnnotation]; tag != c.version {
		c.errorf("%s: tagged %q in index.json, want %s", name, tag, c.version)
	}
	idx, err := a.Index.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		c.errorf("%s: %v", name, err)
		return
	}
	if err := validate.Index(idx); err != nil {
		c.errorf("%s: the index's blobs do not match their digests or platforms: %v", name, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		c.errorf("%s: %v", name, err)
		return
	}
	seen := map[string]bool{}
	for _, m := range im.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			c.errorf("%s: manifest %s has platform %v, want linux/<arch>", name, m.Digest, m.Platform)
			continue
		}
		arch := m.Platform.Architecture
		seen[arch] = true
		want, ok := digests[arch]
		switch {
		case !ok:
			c.errorf("%s: lists linux/%s, which the release has no (valid) archive of", name, arch)
		case m.Digest != want:
			c.errorf("%s: linux/%s is %s, its archive's manifest %s", name, arch, m.Digest, want)
		}
	}
	for _, arch := range c.arches {
		if !seen[arch] {
			c.errorf("%s: no manifest for linux/%s", name, arch)
		}
	}
}

// chartMeta is the part of Chart.yaml the check reads.
type chartMeta struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

// checkChart: the packaged chart's version is the release's without the v,
// its appVersion the release's (the default image tag), its image.tag
// empty so that default holds, and its README carries the values table.
func (c *checker) checkChart(semver string) {
	name := "latencytier-" + semver + ".tgz"
	files, err := tgzFiles(filepath.Join(c.dir, name))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			c.errorf("%s: %v", name, err)
		}
		return
	}
	var meta chartMeta
	if err := yaml.Unmarshal(files["latencytier/Chart.yaml"], &meta); err != nil || meta.Name != "latencytier" {
		c.errorf("%s: latencytier/Chart.yaml: %v (name %q)", name, err, meta.Name)
	}
	if meta.Version != semver || meta.AppVersion != c.version {
		c.errorf("%s: Chart.yaml version %q appVersion %q, want %s and %s", name, meta.Version, meta.AppVersion, semver, c.version)
	}
	var values struct {
		Image struct {
			Tag *string `json:"tag"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(files["latencytier/values.yaml"], &values); err != nil || values.Image.Tag == nil || *values.Image.Tag != "" {
		c.errorf("%s: values.yaml image.tag should be \"\" (the chart's appVersion, %s): %v", name, c.version, err)
	}
	if !bytes.Contains(files["latencytier/README.md"], []byte("| value | default | what it does |")) {
		c.errorf("%s: latencytier/README.md has no values table", name)
	}
}

// tgzFiles reads every regular file of a gzipped tar.
func tgzFiles(file string) (map[string][]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	err = readTar(gz, func(h *tar.Header, r io.Reader) error {
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		b, err := io.ReadAll(r)
		out[path.Clean(h.Name)] = b
		return err
	})
	return out, err
}

// krewPlugin is the part of the krew manifest the check reads.
type krewPlugin struct {
	Spec struct {
		Version   string `json:"version"`
		Platforms []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// checkKrew: the manifest's version is the release's, and each platform
// names an archive of the release by its name, with its sha256.
func (c *checker) checkKrew() {
	b, err := os.ReadFile(filepath.Join(c.dir, krewManifest))
	if err != nil {
		return
	}
	var p krewPlugin
	if err := yaml.Unmarshal(b, &p); err != nil {
		c.errorf("%s: %v", krewManifest, err)
		return
	}
	if p.Spec.Version != c.version {
		c.errorf("%s: version %q, want %s", krewManifest, p.Spec.Version, c.version)
	}
	listed := map[string]bool{}
	for _, pl := range p.Spec.Platforms {
		goos, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		want := "kubectl-latency_" + c.version + "_" + goos + "_" + arch + ".tar.gz"
		if path.Base(pl.URI) != want {
			c.errorf("%s: %s/%s: uri %s, want …/%s", krewManifest, goos, arch, pl.URI, want)
			continue
		}
		listed[want] = true
		sum, err := fileSHA256(filepath.Join(c.dir, want))
		if err != nil {
			c.errorf("%s: %s/%s: %v", krewManifest, goos, arch, err)
		} else if sum != pl.Sha256 {
			c.errorf("%s: %s/%s: sha256 %s, the archive's %s", krewManifest, goos, arch, pl.Sha256, sum)
		}
	}
	names, _ := releaseFiles(c.dir)
	for _, n := range names {
		if pluginArchiveRe.MatchString(n) && !listed[n] {
			c.errorf("%s: %s is in no platform of %s", n, n, krewManifest)
		}
	}
}

// checkBinaries: every Go executable in an archive is the version's build
// for the archive's platform, CGO-free; the image's embed the BPF object;
// with -exec, the ones this machine can run say their version.
func (c *checker) checkBinaries() {
	bins, err := binaries(c.dir)
	if err != nil {
		c.errorf("%v", err)
		return
	}
	for _, b := range bins {
		where := b.artifact + ":" + b.path
		if g, a := b.setting("GOOS"), b.setting("GOARCH"); g != b.goos || a != b.goarch {
			c.errorf("%s: built for %s/%s, in an archive for %s/%s", where, g, a, b.goos, b.goarch)
		}
		if b.setting("CGO_ENABLED") != "0" {
			c.errorf("%s: CGO_ENABLED=%q, want 0 (static)", where, b.setting("CGO_ENABLED"))
		}
		// Go records no -ldflags with -trimpath, so what -X stamped is
		// checked by running the binary (-exec); here only that the string
		// is in it (the darwin plugins are never run).
		if !bytes.Contains(b.data, []byte(c.version)) {
			c.errorf("%s: the version %s is nowhere in the binary (not stamped with -X main.version)", where, c.version)
		}
		if b.goos == "linux" {
			c.checkELF(b, where)
		}
		if b.path == imageBinary && c.bpfObject != nil && !bytes.Contains(b.data, c.bpfObject) {
			c.errorf("%s: does not embed the BPF object (%d bytes)", where, len(c.bpfObject))
		}
		if c.exec && b.goos == "linux" {
			c.run(b, where)
		}
	}
}

func (c *checker) checkELF(b *binary, where string) {
	f, err := elf.NewFile(bytes.NewReader(b.data))
	if err != nil {
		c.errorf("%s: not an ELF executable: %v", where, err)
		return
	}
	defer f.Close()
	if want, ok := elfMachine[b.goarch]; !ok || f.Machine != want || f.Type != elf.ET_EXEC {
		c.errorf("%s: ELF %s %s, want %s ET_EXEC (static)", where, f.Machine, f.Type, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			c.errorf("%s: has a program interpreter (dynamically linked)", where)
		}
	}
}

// run runs b's version (and the image binary's agent --help) when this
// machine can: natively for its own GOARCH, arm64 under qemu-aarch64.
func (c *checker) run(b *binary, where string) {
	var prefix []string
	switch {
	case b.goarch == runtime.GOARCH:
	case b.goarch == "arm64" && c.qemu != "":
		prefix = []string{c.qemu}
	default:
		return
	}
	tmp, err := os.MkdirTemp("", "release-check-")
	if err != nil {
		c.errorf("%v", err)
		return
	}
	defer os.RemoveAll(tmp)
	exe := filepath.Join(tmp, path.Base(b.path))
	if err := os.WriteFile(exe, b.data, 0o755); err != nil {
		c.errorf("%v", err)
		return
	}
	out, err := c.runOne(append(prefix, exe, "version"))
	if err != nil {
		c.errorf("%s version: %v\n%s", where, err, out)
	} else if b.path == imageBinary && strings.TrimSpace(out) != c.version ||
		b.path == pluginBinary && !strings.HasPrefix(out, "kubectl-latency "+c.version+" ") {
		c.errorf("%s version printed %q, want %s", where, strings.TrimSpace(out), c.version)
	}
	if b.path != imageBinary {
		return
	}
	out, err = c.runOne(append(prefix, exe, "agent", "--help"))
	if err != nil || !strings.Contains(out, "latencytier agent") {
		c.errorf("%s agent --help: %v\n%s", where, err, out)
	}
}

func (c *checker) runOne(argv []string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = path.Base(a)
	}
	c.ran = append(c.ran, fmt.Sprintf("%s: %s", strings.Join(args, " "), firstLine(out.String())))
	return out.String(), err
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// checkSBOM: the SBOM names the version, and describes every archive that
// holds a Go executable and that executable, each with its sha256.
func (c *checker) checkSBOM() {
	b, err := os.ReadFile(filepath.Join(c.dir, sbomFile(c.version)))
	if err != nil {
		return
	}
	var doc spdxDoc
	if err := json.Unmarshal(b, &doc); err != nil || doc.SPDXVersion != "SPDX-2.3" {
		c.errorf("%s: not SPDX 2.3 JSON: %v", sbomFile(c.version), err)
		return
	}
	sums := map[string][]string{} // packageFileName -> sha256s
	for _, p := range doc.Packages {
		for _, s := range p.Checksums {
			if s.Algorithm == "SHA256" && p.PackageFileName != "" {
				sums[p.PackageFileName] = append(sums[p.PackageFileName], s.Value)
			}
		}
	}
	bins, err := binaries(c.dir)
	if err != nil {
		return // checkBinaries said so
	}
	var missing []string
	for _, bin := range bins {
		sum, _ := fileSHA256(filepath.Join(c.dir, bin.artifact))
		if !contains(sums[bin.artifact], sum) {
			missing = append(missing, bin.artifact+" (sha256 "+sum+")")
		}
		if !contains(sums[bin.path], bin.sha256()) {
			missing = append(missing, bin.artifact+":"+bin.path+" (sha256 "+bin.sha256()+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		c.errorf("%s does not describe %s", sbomFile(c.version), m)
	}
	if doc.Name != "latencytier-"+c.version {
		c.errorf("%s: name %q, want latencytier-%s", sbomFile(c.version), doc.Name, c.version)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
