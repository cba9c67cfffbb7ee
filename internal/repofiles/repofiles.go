// Package repofiles owns the rule for what the repository may track: no
// build output (an ELF executable or shared object) and nothing over 1 MB
// but test data and the generated vmlinux.h. A committed 72 MB binary was
// 98 % of the pack once. Its test runs the rule over the repository, so
// `make test` enforces it.
package repofiles

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// MaxSize is the largest file the repository tracks outside test data.
const MaxSize = 1 << 20

// exempt reports whether path may exceed MaxSize: fixtures under a
// testdata directory and bpftool's BTF dump the BPF C includes (a
// snapshot, regenerated only with generate-bpf).
func exempt(path string) bool {
	if path == "agent/measure/bpf/vmlinux.h" || strings.HasPrefix(path, "testdata/") {
		return true
	}
	return strings.Contains(path, "/testdata/")
}

// Tracked lists the files git tracks in the work tree at root.
func Tracked(root string) ([]string, error) {
	cmd := exec.Command("git", "-C", root, "ls-files", "-z")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files in %s: %w: %s", root, err, strings.TrimSpace(stderr.String()))
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

// Check returns one problem per tracked file at root that breaks the rule:
// over MaxSize outside the exemptions, or an ELF executable or shared
// object. Relocatable ELF objects (the BPF objects bpf2go generates from
// committed C) are generated files and pass. A tracked file deleted from
// the work tree is skipped.
func Check(root string) ([]string, error) {
	files, err := Tracked(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, f := range files {
		info, err := os.Lstat(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !info.Mode().IsRegular() {
			continue
		}
		if info.Size() > MaxSize && !exempt(f) {
			problems = append(problems, fmt.Sprintf("%s: %d bytes, over 1 MB (keep it out of git, or under testdata/)", f, info.Size()))
		}
		built, err := builtELF(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		if built != "" {
			problems = append(problems, fmt.Sprintf("%s: an ELF %s, a build output (remove it; bin/ is ignored)", f, built))
		}
	}
	return problems, nil
}

// builtELF names the ELF type of the file at path when it is an
// executable or shared object, and returns "" for anything else.
func builtELF(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	var ident [elf.EI_NIDENT + 2]byte // e_ident, then e_type
	if _, err := io.ReadFull(fh, ident[:]); err != nil {
		return "", nil // shorter than an ELF header
	}
	if string(ident[:4]) != elf.ELFMAG {
		return "", nil
	}
	var order binary.ByteOrder = binary.LittleEndian
	if elf.Data(ident[elf.EI_DATA]) == elf.ELFDATA2MSB {
		order = binary.BigEndian
	}
	switch t := elf.Type(order.Uint16(ident[elf.EI_NIDENT:])); t {
	case elf.ET_EXEC:
		return "executable", nil
	case elf.ET_DYN:
		return "shared object (or position-independent executable)", nil
	}
	return "", nil
}
