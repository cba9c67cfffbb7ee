package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The SBOM is SPDX 2.3 JSON, written from what the Go toolchain recorded
// in each binary (debug/buildinfo, what `go version -m` prints): every
// artifact of the release that holds a Go executable is a package that
// CONTAINS the executable, which CONTAINS the Go standard library and
// every module linked into it, each with its purl and go.sum hash.

type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	DocumentDescribes []string           `json:"documentDescribes"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string            `json:"SPDXID"`
	Name             string            `json:"name"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	PackageFileName  string            `json:"packageFileName,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	LicenseConcluded string            `json:"licenseConcluded"`
	LicenseDeclared  string            `json:"licenseDeclared"`
	CopyrightText    string            `json:"copyrightText"`
	PrimaryPurpose   string            `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
	Comment          string            `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const (
	noAssertion = "NOASSERTION"
	ownLicense  = "Apache-2.0"
)

func runSBOM(args []string) error {
	fs := flag.NewFlagSet("sbom", flag.ContinueOnError)
	version := fs.String("version", "", "the release's version")
	created := fs.Int64("created", 0, "creation time, Unix seconds (release.sh: the commit's time, so the SBOM is reproducible)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" || fs.NArg() != 1 {
		return errors.New("sbom: want -version and the release directory")
	}
	dir := fs.Arg(0)
	doc, err := buildSBOM(dir, *version, time.Unix(*created, 0))
	if err != nil {
		return fmt.Errorf("sbom: %w", err)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, sbomFile(*version)), append(b, '\n'), 0o644)
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(kind string, parts ...string) string {
	return "SPDXRef-" + kind + "-" + spdxIDUnsafe.ReplaceAllString(strings.Join(parts, "-"), "-")
}

// buildSBOM describes the Go executables of the release in dir.
func buildSBOM(dir, version string, created time.Time) (*spdxDoc, error) {
	bins, err := binaries(dir)
	if err != nil {
		return nil, err
	}
	if len(bins) == 0 {
		return nil, fmt.Errorf("%s holds no image or plugin archive", dir)
	}
	doc := &spdxDoc{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:         "latencytier-" + version,
		CreationInfo: spdxCreation{Created: created.UTC().Format(time.RFC3339), Creators: []string{"Tool: latencytier-hack-release"}},
	}
	modules := map[string]spdxPackage{}
	for _, b := range bins {
		sum, err := fileSHA256(filepath.Join(dir, b.artifact))
		if err != nil {
			return nil, err
		}
		artID, binID := spdxID("Artifact", b.artifact), spdxID("Binary", b.artifact, b.path)
		doc.DocumentDescribes = append(doc.DocumentDescribes, artID)
		doc.Packages = append(doc.Packages, spdxPackage{
			SPDXID: artID, Name: b.artifact, VersionInfo: version, PackageFileName: b.artifact,
			DownloadLocation: noAssertion, Checksums: []spdxChecksum{{"SHA256", sum}},
			LicenseConcluded: ownLicense, LicenseDeclared: ownLicense, CopyrightText: noAssertion,
			PrimaryPurpose: purpose(b.artifact),
		}, spdxPackage{
			SPDXID: binID, Name: b.info.Path, VersionInfo: version, PackageFileName: b.path,
			DownloadLocation: noAssertion, Checksums: []spdxChecksum{{"SHA256", b.sha256()}},
			LicenseConcluded: ownLicense, LicenseDeclared: ownLicense, CopyrightText: noAssertion,
			PrimaryPurpose: "APPLICATION",
			Comment:        fmt.Sprintf("%s, %s/%s, built with %s", b.path, b.goos, b.goarch, b.info.GoVersion),
		})
		doc.Relationships = append(doc.Relationships,
			spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", artID},
			spdxRelationship{artID, "CONTAINS", binID})
		for _, m := range binaryModules(b) {
			doc.Relationships = append(doc.Relationships, spdxRelationship{binID, "CONTAINS", m.SPDXID})
			modules[m.SPDXID] = m
		}
	}
	ids := make([]string, 0, len(modules))
	for id := range modules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		doc.Packages = append(doc.Packages, modules[id])
	}
	// A namespace unique to this content, as SPDX asks, without a random
	// part: the same release gives the same SBOM.
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	doc.DocumentNamespace = "https://spdx.org/spdxdocs/latencytier-" + version + "-" + sha256Hex(b)[:16]
	return doc, nil
}

func purpose(artifact string) string {
	if imageArchiveRe.MatchString(artifact) {
		return "CONTAINER"
	}
	return "ARCHIVE"
}

// binaryModules are the Go standard library and the modules linked into
// b (a replaced module as what replaced it), as SPDX packages.
func binaryModules(b *binary) []spdxPackage {
	out := []spdxPackage{{
		SPDXID: spdxID("Module", "stdlib", b.info.GoVersion), Name: "stdlib", VersionInfo: b.info.GoVersion,
		DownloadLocation: noAssertion, LicenseConcluded: noAssertion, LicenseDeclared: "BSD-3-Clause", CopyrightText: noAssertion,
		PrimaryPurpose: "LIBRARY",
		ExternalRefs:   []spdxExternalRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/stdlib@" + b.info.GoVersion}},
	}}
	for _, d := range b.info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		p := spdxPackage{
			SPDXID: spdxID("Module", d.Path, d.Version), Name: d.Path, VersionInfo: d.Version,
			DownloadLocation: noAssertion, LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
			PrimaryPurpose: "LIBRARY",
			ExternalRefs:   []spdxExternalRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + d.Path + "@" + d.Version}},
		}
		if d.Sum != "" {
			p.Comment = "go.sum " + strconv.Quote(d.Sum)
		}
		out = append(out, p)
	}
	return out
}
