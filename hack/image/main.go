// Command image builds an image tarball from local files, with no registry
// and no container engine: an empty base, one layer holding /tmp and the
// given files, an entrypoint and optionally a user, a command and labels.
// hack/local-cluster imports the result into containerd with `ctr images
// import`; the release (hack/release.sh) writes OCI archives with -format
// oci, per architecture, with the user, command and labels of the
// Dockerfile's final stage (hack/release's TestDockerfileMatchesRelease
// keeps the two in step).
//
//	go run ./hack/image -o latencytier.tar -tag latencytier.local/latencytier:dev \
//	    -entrypoint /latencytier -file bin/latencytier=/latencytier
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"latencytier.io/latencytier/internal/ociarchive"
)

// labelList collects repeated -label key=value flags.
type labelList map[string]string

func (l labelList) String() string { return fmt.Sprint(map[string]string(l)) }

func (l labelList) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	l[k] = val
	return nil
}

// spec is what the image holds and runs, besides its files.
type spec struct {
	arch       string
	entrypoint []string
	cmd        []string
	user       string
	labels     map[string]string
	oci        bool // OCI media types (manifest, config, layer) instead of Docker's
}

// fileList collects repeated -file local=/path/in/image flags.
type fileList []fileSpec

type fileSpec struct{ local, inImage string }

func (f *fileList) String() string { return fmt.Sprint(*f) }

func (f *fileList) Set(v string) error {
	local, inImage, ok := strings.Cut(v, "=")
	if !ok || local == "" || !strings.HasPrefix(inImage, "/") {
		return fmt.Errorf("want local=/absolute/path/in/image, got %q", v)
	}
	*f = append(*f, fileSpec{local: local, inImage: inImage})
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	out := fs.String("o", "", "output tarball path")
	tag := fs.String("tag", "", "image reference, e.g. latencytier.local/latencytier:dev")
	entrypoint := fs.String("entrypoint", "", "entrypoint (space-separated)")
	cmd := fs.String("cmd", "", "command: the entrypoint's default arguments (space-separated)")
	user := fs.String("user", "", "user[:group] the image runs as (numeric)")
	arch := fs.String("arch", runtime.GOARCH, "architecture the image is for (linux/ARCH)")
	format := fs.String("format", "docker", "docker (docker save tarball) or oci (OCI archive: an OCI image layout in a tar)")
	labels := labelList{}
	fs.Var(labels, "label", "key=value label (repeatable)")
	var files fileList
	fs.Var(&files, "file", "local=/path/in/image (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *tag == "" || len(files) == 0 {
		return errors.New("-o, -tag and at least one -file are required")
	}
	if *format != "docker" && *format != "oci" {
		return fmt.Errorf("-format %q: want docker or oci", *format)
	}
	ref, err := name.NewTag(*tag, name.WeakValidation)
	if err != nil {
		return fmt.Errorf("parsing tag: %w", err)
	}
	img, err := build(files, spec{arch: *arch, entrypoint: strings.Fields(*entrypoint), cmd: strings.Fields(*cmd),
		user: *user, labels: labels, oci: *format == "oci"})
	if err != nil {
		return err
	}
	write := tarball.WriteToFile
	if *format == "oci" {
		write = func(out string, ref name.Reference, img v1.Image, _ ...tarball.WriteOption) error {
			return ociarchive.WriteImage(out, img, ref.(name.Tag))
		}
	}
	if err := write(*out, ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	return nil
}

// build returns an image of one layer holding files, as s says.
func build(files fileList, s spec) (v1.Image, error) {
	layerTar, err := layer(files)
	if err != nil {
		return nil, err
	}
	var opts []tarball.LayerOption
	base := empty.Image
	if s.oci {
		opts = append(opts, tarball.WithMediaType(types.OCILayer))
		base = mutate.ConfigMediaType(mutate.MediaType(base, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating layer: %w", err)
	}
	img, err := mutate.AppendLayers(base, l)
	if err != nil {
		return nil, fmt.Errorf("appending layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cf = cf.DeepCopy()
	// containerd imports only images for its platform, so say which one.
	cf.OS = "linux"
	cf.Architecture = s.arch
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Entrypoint = s.entrypoint
	cf.Config.Cmd = s.cmd
	cf.Config.User = s.user
	if len(s.labels) > 0 {
		cf.Config.Labels = s.labels
	}
	cf.Config.Env = []string{"PATH=/"}
	return mutate.ConfigFile(img, cf)
}

// layer returns a tar stream with /tmp and every file at its image path.
func layer(files fileList) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	addDir := func(dir string, mode int64) error {
		if dir == "" || dirs[dir] {
			return nil
		}
		dirs[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: mode, ModTime: epoch})
	}
	if err := addDir("tmp", 0o1777); err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f.local)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f.local, err)
		}
		rel := strings.TrimPrefix(f.inImage, "/")
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			if err := addDir(strings.Join(parts[:i], "/"), 0o755); err != nil {
				return nil, err
			}
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o755, Size: int64(len(data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing header for %s: %w", rel, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("writing %s: %w", rel, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing layer: %w", err)
	}
	return buf.Bytes(), nil
}
