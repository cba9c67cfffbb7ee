package main

import (
	"archive/tar"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// No container engine runs here and no base image can be pulled, so the
// Dockerfile is never built in CI. TestDockerfileMatchesRelease keeps it
// describing the image make release builds: it reads the Dockerfile's final
// stage (FROM scratch; what it copies from the build stage's /rootfs, its
// labels, env, user, entrypoint and command) and compares it with the
// image release.sh wrote (through hack/image), and the build stage's go
// build flags with release.sh's. An instruction it does not understand
// fails it: a change to the Dockerfile must come with one to the release
// (or to this test).

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	op, args string
}

func parseDockerfile(t *testing.T, file string) (stages [][]instruction) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cur string
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		cur += trimmed
		op, args, _ := strings.Cut(cur, " ")
		cur = ""
		in := instruction{strings.ToUpper(op), strings.Join(strings.Fields(args), " ")}
		if in.op == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s: %s before the first FROM", file, in.op)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	return stages
}

// imageSpec is what an image is: its files and how it runs.
type imageSpec struct {
	Files      map[string]string // path -> "dir 1777 0:0" / "file 755 0:0"
	Labels     map[string]string
	Env        []string
	User       string
	Entrypoint []string
	Cmd        []string
}

var (
	rootfsDirRe  = regexp.MustCompile(`install -d -m ([0-7]+) /rootfs/(\S+)`)
	rootfsFileRe = regexp.MustCompile(`go build .* -o /rootfs/(\S+) `)
	goBuildRe    = regexp.MustCompile(`CGO_ENABLED=0 (?:GOOS=\S+ GOARCH=\S+ )?go build (.*?) -o \S+ \.`)
)

// dockerfileSpec is the image the Dockerfile's final stage builds, with
// ARG VERSION set to version.
func dockerfileSpec(t *testing.T, stages [][]instruction, version string) imageSpec {
	t.Helper()
	build, final := stages[0], stages[len(stages)-1]
	if len(stages) != 2 || !strings.HasSuffix(build[0].args, " AS build") || final[0].args != "scratch" {
		t.Fatalf("want two stages, FROM … AS build and FROM scratch: %v", stages)
	}
	spec := imageSpec{Files: map[string]string{}, Labels: map[string]string{}}
	expand := strings.NewReplacer("${VERSION}", version, "$VERSION", version).Replace
	for _, in := range final[1:] {
		switch in.op {
		case "ARG":
			if in.args != "VERSION=dev" {
				t.Errorf("final stage: ARG %s: the test knows ARG VERSION=dev", in.args)
			}
		case "LABEL":
			for _, kv := range strings.Fields(in.args) {
				k, v, _ := strings.Cut(kv, "=")
				spec.Labels[k] = expand(v)
			}
		case "ENV":
			spec.Env = append(spec.Env, in.args)
		case "USER":
			spec.User = in.args
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(in.args), &argv); err != nil {
				t.Errorf("%s %s: want the exec (JSON) form: %v", in.op, in.args, err)
			}
			if in.op == "CMD" {
				spec.Cmd = argv
			} else {
				spec.Entrypoint = argv
			}
		case "COPY":
			if in.args != "--from=build /rootfs/ /" {
				t.Errorf("final stage: COPY %s: the test knows COPY --from=build /rootfs/ /", in.args)
			}
			rootfs(t, build, spec.Files)
		default:
			t.Errorf("final stage: %s %s: the test does not know what it does to the image", in.op, in.args)
		}
	}
	return spec
}

// rootfs adds what the build stage's RUNs put under /rootfs: directories
// made with install -d -m MODE and go build's output (0755, as go build
// writes it under umask 022). Any other mention of /rootfs fails.
func rootfs(t *testing.T, build []instruction, files map[string]string) {
	t.Helper()
	for _, in := range build {
		if in.op != "RUN" {
			continue
		}
		known := 0
		for _, m := range rootfsDirRe.FindAllStringSubmatch(in.args, -1) {
			files[m[2]] = "dir " + strings.TrimLeft(m[1], "0") + " 0:0"
			known++
		}
		for _, m := range rootfsFileRe.FindAllStringSubmatch(in.args+" ", -1) {
			files[m[1]] = "file 755 0:0"
			known++
		}
		if n := strings.Count(in.args, "/rootfs"); n != known {
			t.Errorf("build stage: RUN %s: %d mentions of /rootfs, %d the test understands (install -d -m MODE /rootfs/DIR, go build -o /rootfs/FILE)", in.args, n, known)
		}
	}
}

// releaseImageSpec is the image in the release's archive for arch.
func releaseImageSpec(t *testing.T, dir, arch string) imageSpec {
	t.Helper()
	a, img, cf, err := imageOf(filepath.Join(dir, "latencytier_"+testVersion+"_linux_"+arch+".oci.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	files, err := imageFiles(img)
	if err != nil {
		t.Fatal(err)
	}
	spec := imageSpec{Files: map[string]string{}, Labels: cf.Config.Labels, Env: cf.Config.Env, User: cf.Config.User,
		Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd}
	for n, f := range files {
		kind := map[byte]string{tar.TypeDir: "dir", tar.TypeReg: "file"}[f.typ]
		if kind == "" {
			kind = "type " + string(f.typ)
		}
		spec.Files[n] = kind + " " + strconv.FormatInt(f.mode, 8) + " " + strconv.Itoa(f.uid) + ":" + strconv.Itoa(f.gid)
	}
	return spec
}

func TestDockerfileMatchesRelease(t *testing.T) {
	dir := fakeRelease(t)
	stages := parseDockerfile(t, "../../Dockerfile")
	want := dockerfileSpec(t, stages, testVersion)
	for _, arch := range imageArches {
		if got := releaseImageSpec(t, dir, arch); !reflect.DeepEqual(got, want) {
			t.Errorf("linux/%s: make release's image is\n  %+v\nthe Dockerfile's final stage builds\n  %+v", arch, got, want)
		}
	}
	// The binary: the same go build flags (release.sh adds GOOS/GOARCH).
	script, err := os.ReadFile("release.sh")
	if err != nil {
		t.Fatal(err)
	}
	var docker string
	for _, in := range stages[0] {
		if m := goBuildRe.FindStringSubmatch(in.args); m != nil {
			docker = m[1]
		}
	}
	rel := goBuildRe.FindStringSubmatch(string(script))
	norm := strings.NewReplacer("${VERSION}", "$VERSION").Replace
	if docker == "" || rel == nil || norm(docker) != norm(rel[1]) {
		t.Errorf("go build flags: Dockerfile %q, release.sh %q", docker, rel)
	}
}

// TestDockerfileCopiesEveryPackage: the build stage copies every top-level
// directory of the repository that the binary's packages live in, so a
// new one cannot break `docker build` unnoticed.
func TestDockerfileCopiesEveryPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "../..").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	need := map[string]bool{}
	for _, d := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		if top, _, _ := strings.Cut(rel, string(filepath.Separator)); top != "." {
			need[top+"/"] = true
		} else {
			need["main.go"] = true
		}
	}
	copied := map[string]bool{}
	for _, in := range parseDockerfile(t, "../../Dockerfile")[0] {
		if in.op == "COPY" {
			f := strings.Fields(in.args)
			for _, src := range f[:len(f)-1] {
				copied[src] = true
			}
		}
	}
	var missing []string
	for n := range need {
		if !copied[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the Dockerfile's build stage does not COPY %v, which the binary's packages are in", missing)
	}
}
