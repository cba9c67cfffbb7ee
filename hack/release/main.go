// Command release is the Go half of `make release` (hack/release/release.sh
// is the other): it joins the per-architecture OCI archives under one
// multi-arch image index, writes the SBOM from the binaries' own build
// information, and checks that a release directory's pieces agree with
// each other (check.go). It needs no network.
//
//	go run ./hack/release index -o DIR/latencytier_v0.1.0.oci.tar -tag latencytier:v0.1.0 A.oci.tar B.oci.tar
//	go run ./hack/release sbom -version v0.1.0 [-created UNIX] DIR   (writes DIR/latencytier_v0.1.0.spdx.json)
//	go run ./hack/release check -version v0.1.0 [-exec] [-bpf-object F] DIR
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"latencytier.io/latencytier/internal/ociarchive"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("want a subcommand: index, sbom or check")
	}
	switch args[0] {
	case "index":
		return runIndex(args[1:])
	case "sbom":
		return runSBOM(args[1:])
	case "check":
		return runCheck(args[1:])
	}
	return fmt.Errorf("unknown subcommand %q: want index, sbom or check", args[0])
}

func runIndex(args []string) error {
	fs := flag.NewFlagSet("index", flag.ContinueOnError)
	out := fs.String("o", "", "output OCI archive")
	tag := fs.String("tag", "", "reference of the index, e.g. latencytier:v0.1.0")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *tag == "" || fs.NArg() == 0 {
		return errors.New("index: -o, -tag and at least one OCI archive are required")
	}
	ref, err := name.NewTag(*tag, name.WeakValidation)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	return writeIndex(*out, ref, fs.Args())
}

// writeIndex joins the image of each single-image OCI archive under one
// OCI image index, each manifest with its image's platform.
func writeIndex(out string, ref name.Tag, archives []string) error {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[string]string{}
	for _, file := range archives {
		a, err := ociarchive.Open(file)
		if err != nil {
			return err
		}
		defer a.Close()
		img, err := onlyImage(a.Index)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		p := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
		if prev, ok := seen[p.String()]; ok {
			return fmt.Errorf("%s and %s are both %s", prev, file, p)
		}
		seen[p.String()] = file
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return ociarchive.WriteIndex(out, idx, ref)
}

// onlyImage is the one image an index lists; anything else is an error.
func onlyImage(idx v1.ImageIndex) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsImage() {
		return nil, fmt.Errorf("index.json lists %d manifests, want one image", len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}
