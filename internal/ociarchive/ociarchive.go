// Package ociarchive writes and reads OCI archives: an OCI image layout
// (oci-layout, index.json, blobs/sha256/...) packed into one tar file, the
// form `skopeo copy oci-archive:FILE`, `crane push` (after untarring) and
// `ctr images import` read. The release (hack/release) ships one per
// architecture and one holding both under a multi-arch image index; the
// archives are reproducible (sorted entries, mtime 0, owner 0), so their
// sha256 can be rebuilt.
package ociarchive

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Annotations naming the image in index.json: OCI's ref.name holds the tag
// (skopeo's oci-archive:FILE:TAG), containerd's the full reference (what
// `ctr images import` names the image).
const (
	RefNameAnnotation    = "org.opencontainers.image.ref.name"
	ContainerdAnnotation = "io.containerd.image.name"
)

// WriteImage writes img, named ref, as the one manifest of an OCI archive.
func WriteImage(file string, img v1.Image, ref name.Tag) error {
	return write(file, func(p layout.Path) error { return p.AppendImage(img, layout.WithAnnotations(annotations(ref))) })
}

// WriteIndex writes idx, named ref, as the one entry of an OCI archive's
// index.json, with every image it holds.
func WriteIndex(file string, idx v1.ImageIndex, ref name.Tag) error {
	return write(file, func(p layout.Path) error { return p.AppendIndex(idx, layout.WithAnnotations(annotations(ref))) })
}

func annotations(ref name.Tag) map[string]string {
	return map[string]string{RefNameAnnotation: ref.TagStr(), ContainerdAnnotation: ref.String()}
}

// write lays the layout out in a temporary directory, lets add fill it and
// packs it into file.
func write(file string, add func(layout.Path) error) error {
	dir, err := os.MkdirTemp("", "ociarchive-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing layout: %w", err)
	}
	if err := add(p); err != nil {
		return fmt.Errorf("writing layout: %w", err)
	}
	return pack(dir, file)
}

// pack tars dir's tree into file: names sorted, mtime 0, owner 0, files
// 0644 and directories 0755.
func pack(dir, file string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		rel, err := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(out)
	for _, n := range names {
		if err := addEntry(tw, dir, n); err != nil {
			out.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func addEntry(tw *tar.Writer, dir, n string) error {
	full := filepath.Join(dir, filepath.FromSlash(n))
	st, err := os.Stat(full)
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: n, ModTime: time.Unix(0, 0), Mode: 0o644, Format: tar.FormatPAX}
	if st.IsDir() {
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, n+"/", 0o755
		return tw.WriteHeader(hdr)
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	f, err := os.Open(full)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// Archive is an OCI archive unpacked for reading.
type Archive struct {
	dir string
	// Index is the layout's index.json.
	Index v1.ImageIndex
}

// Open unpacks file into a temporary directory (Close removes it) and
// reads its index.json. The archive is input: an entry that is not a
// plain file or directory, or whose name leaves the layout, is refused.
func Open(file string) (*Archive, error) {
	dir, err := os.MkdirTemp("", "ociarchive-")
	if err != nil {
		return nil, err
	}
	a := &Archive{dir: dir}
	if err := unpack(file, dir); err != nil {
		a.Close()
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if a.Index, err = layout.ImageIndexFromPath(dir); err != nil {
		a.Close()
		return nil, fmt.Errorf("%s: not an OCI layout: %w", file, err)
	}
	return a, nil
}

// Close removes the unpacked layout.
func (a *Archive) Close() error { return os.RemoveAll(a.dir) }

func unpack(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		n := path.Clean(h.Name)
		if n == "." || path.IsAbs(n) || n == ".." || strings.HasPrefix(n, "../") {
			return fmt.Errorf("entry %q leaves the layout", h.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(n))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := writeFile(target, tr); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: type %c, want a file or directory", h.Name, h.Typeflag)
		}
	}
}

func writeFile(target string, r io.Reader) error {
	out, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
