package ociarchive

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// TestWriteImageRoundTrip: an image written is read back with the same
// digest, named by its tag and full reference, and a second write gives
// the same bytes.
func TestWriteImageRoundTrip(t *testing.T) {
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref := name.MustParseReference("registry.example/latencytier:v1.2.3").(name.Tag)
	dir := t.TempDir()
	a1, a2 := filepath.Join(dir, "1.tar"), filepath.Join(dir, "2.tar")
	for _, f := range []string{a1, a2} {
		if err := WriteImage(f, img, ref); err != nil {
			t.Fatal(err)
		}
	}
	b1, _ := os.ReadFile(a1)
	b2, _ := os.ReadFile(a2)
	if !bytes.Equal(b1, b2) {
		t.Error("two writes of one image differ")
	}
	a, err := Open(a1)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	m, err := a.Index.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("index.json: %v, %+v", err, m)
	}
	want, _ := img.Digest()
	d := m.Manifests[0]
	if d.Digest != want || d.Annotations[RefNameAnnotation] != "v1.2.3" || d.Annotations[ContainerdAnnotation] != "registry.example/latencytier:v1.2.3" {
		t.Errorf("index.json lists %s %v, want %s named v1.2.3 and the full reference", d.Digest, d.Annotations, want)
	}
	// A reference without a registry stays as given: containerd would read
	// ggcr's index.docker.io as a registry of its own, not docker.io.
	if got := annotations(name.MustParseReference("latencytier:v0.1.0").(name.Tag))[ContainerdAnnotation]; got != "latencytier:v0.1.0" {
		t.Errorf("latencytier:v0.1.0 is named %q for containerd", got)
	}
	if _, err := a.Index.Image(want); err != nil {
		t.Error(err)
	}
}

// TestOpenRefusesHostileArchives: an archive is input; an entry that
// leaves the layout, or is not a file or directory, is refused by name.
func TestOpenRefusesHostileArchives(t *testing.T) {
	for _, tc := range []struct {
		hdr  tar.Header
		want string
	}{
		{tar.Header{Name: "../escape", Typeflag: tar.TypeReg}, `entry "../escape" leaves the layout`},
		{tar.Header{Name: "/etc/passwd", Typeflag: tar.TypeReg}, `entry "/etc/passwd" leaves the layout`},
		{tar.Header{Name: "blobs/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, `entry "blobs/link": type 2, want a file or directory`},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&tc.hdr); err != nil {
			t.Fatal(err)
		}
		tw.Close()
		f := filepath.Join(t.TempDir(), "a.tar")
		if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(f)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.hdr.Name, err, tc.want)
		}
	}
}
