package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"latencytier.io/latencytier/internal/ociarchive"
)

// The names of a release's files (release.sh writes them; check.go and
// the SBOM find them by these).
var (
	imageArchiveRe  = regexp.MustCompile(`^latencytier_(v[^_]+)_linux_([a-z0-9]+)\.oci\.tar$`)
	pluginArchiveRe = regexp.MustCompile(`^kubectl-latency_(v[^_]+)_([a-z0-9]+)_([a-z0-9]+)\.tar\.gz$`)
)

const (
	checksumsFile = "SHA256SUMS"
	krewManifest  = "latency.yaml"
	imageBinary   = "/latencytier"
	pluginBinary  = "kubectl-latency"
)

// sbomFile is the SBOM's name for version.
func sbomFile(version string) string { return "latencytier_" + version + ".spdx.json" }

// binary is a Go executable found in an artifact of the release.
type binary struct {
	artifact string // file name in the release directory
	path     string // path inside the artifact
	goos     string
	goarch   string
	data     []byte
	info     *buildinfo.BuildInfo
}

func (b *binary) sha256() string { return sha256Hex(b.data) }

func sha256Hex(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

func fileSHA256(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// setting is the value of key in the binary's build settings ("" if none).
func (b *binary) setting(key string) string {
	for _, s := range b.info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// readBuildInfo reads the Go build information of an executable.
func readBuildInfo(data []byte) (*buildinfo.BuildInfo, error) {
	bi, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("no Go build information: %w", err)
	}
	return bi, nil
}

// releaseFiles lists the regular files of dir, sorted.
func releaseFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file (a release directory holds only files)", filepath.Join(dir, e.Name()))
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// binaries returns the Go executables of the release in dir: the image's
// entrypoint in each per-architecture OCI archive, and the plugin in each
// plugin archive.
func binaries(dir string) ([]*binary, error) {
	names, err := releaseFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []*binary
	for _, n := range names {
		var b *binary
		switch {
		case imageArchiveRe.MatchString(n):
			b, err = imageArchiveBinary(filepath.Join(dir, n))
		case pluginArchiveRe.MatchString(n):
			b, err = pluginArchiveBinary(filepath.Join(dir, n))
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		if b.info, err = readBuildInfo(b.data); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", n, b.path, err)
		}
		b.artifact = n
		out = append(out, b)
	}
	return out, nil
}

// imageOf opens a single-image OCI archive and returns its image, its
// manifest's digest and its config.
func imageOf(file string) (*ociarchive.Archive, v1.Image, *v1.ConfigFile, error) {
	a, err := ociarchive.Open(file)
	if err != nil {
		return nil, nil, nil, err
	}
	img, err := onlyImage(a.Index)
	if err == nil {
		var cf *v1.ConfigFile
		if cf, err = img.ConfigFile(); err == nil {
			return a, img, cf, nil
		}
	}
	a.Close()
	return nil, nil, nil, fmt.Errorf("%s: %w", file, err)
}

// imageArchiveBinary extracts the entrypoint of the image in file.
func imageArchiveBinary(file string) (*binary, error) {
	a, img, cf, err := imageOf(file)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	if len(cf.Config.Entrypoint) == 0 {
		return nil, fmt.Errorf("%s: the image has no entrypoint", file)
	}
	entry := cf.Config.Entrypoint[0]
	files, err := imageFiles(img)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	f, ok := files[strings.TrimPrefix(entry, "/")]
	if !ok || f.typ != tar.TypeReg {
		return nil, fmt.Errorf("%s: the entrypoint %s is not a file in the image", file, entry)
	}
	return &binary{path: entry, goos: cf.OS, goarch: cf.Architecture, data: f.data}, nil
}

// imageFile is one entry of an image's layers.
type imageFile struct {
	typ  byte
	mode int64
	uid  int
	gid  int
	data []byte
}

// imageFiles flattens the image's layers into its file tree by path
// (relative, no leading or trailing slash). Whiteouts are refused: a
// release image has one layer.
func imageFiles(img v1.Image) (map[string]imageFile, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	out := map[string]imageFile{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, err
		}
		err = readTar(rc, func(h *tar.Header, r io.Reader) error {
			n := path.Clean(strings.TrimPrefix(h.Name, "/"))
			if strings.HasPrefix(path.Base(n), ".wh.") {
				return fmt.Errorf("layer entry %s is a whiteout", h.Name)
			}
			data, err := io.ReadAll(r)
			out[n] = imageFile{typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, data: data}
			return err
		})
		rc.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func readTar(r io.Reader, each func(*tar.Header, io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := each(h, tr); err != nil {
			return err
		}
	}
}

// pluginArchiveBinary extracts kubectl-latency from a plugin archive.
func pluginArchiveBinary(file string) (*binary, error) {
	m := pluginArchiveRe.FindStringSubmatch(filepath.Base(file))
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var data []byte
	err = readTar(gz, func(h *tar.Header, r io.Reader) error {
		if path.Clean(h.Name) != pluginBinary || h.Typeflag != tar.TypeReg {
			return nil
		}
		var err error
		data, err = io.ReadAll(r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if data == nil {
		return nil, fmt.Errorf("%s: no %s in the archive", file, pluginBinary)
	}
	return &binary{path: pluginBinary, goos: m[2], goarch: m[3], data: data}, nil
}
