// Package host owns every path on the node the agent reads or writes. A Root
// is the host's filesystem root: "/" on a bare node, "/host" inside the
// DaemonSet pod, a temp dir in tests. No other package builds a /proc or /sys
// path by hand; they ask a Root.
package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Root is the host filesystem root.
type Root struct {
	dir string
}

// New returns a Root at dir ("/" for the real host).
func New(dir string) *Root {
	if dir == "" {
		dir = "/"
	}
	return &Root{dir: filepath.Clean(dir)}
}

// Dir is the root directory itself.
func (r *Root) Dir() string { return r.dir }

// Path joins elems under the root. The joined elements are cleaned as if
// the root were "/": ".." stops at the root and an absolute element is
// taken relative to it, so no path Path returns climbs out of the root.
//
// The confinement is lexical. Symlinks inside the root are followed by the
// kernel when the path is opened, and an absolute symlink resolves against
// the agent's own "/", not the host root. That is intended for the trees the
// agent walks (/proc and /sys are kernel filesystems whose links the kernel
// makes; test roots link proc and sys to the real ones), and it is why the
// agent creates its state directory itself, mode 0700, owned by root: no
// one but root can plant a link on the paths it writes there.
func (r *Root) Path(elem ...string) string {
	return filepath.Join(r.dir, filepath.Clean("/"+filepath.Join(elem...)))
}

// Confine takes a path recorded earlier (a journal entry) back under the
// root: an absolute path already under the root is kept, any other path is
// taken relative to the root, as Path does.
func (r *Root) Confine(path string) string {
	if filepath.IsAbs(path) {
		c := filepath.Clean(path)
		if r.dir == "/" || c == r.dir || strings.HasPrefix(c, r.dir+"/") {
			return c
		}
	}
	return r.Path(path)
}

// Proc is a path under the host's /proc.
func (r *Root) Proc(elem ...string) string { return r.Path(append([]string{"proc"}, elem...)...) }

// Sys is a path under the host's /sys.
func (r *Root) Sys(elem ...string) string { return r.Path(append([]string{"sys"}, elem...)...) }

// Cgroup is a path under the host's /sys/fs/cgroup.
func (r *Root) Cgroup(elem ...string) string {
	return r.Path(append([]string{"sys", "fs", "cgroup"}, elem...)...)
}

// DebugSched is a path under the host's /sys/kernel/debug/sched.
func (r *Root) DebugSched(elem ...string) string {
	return r.Path(append([]string{"sys", "kernel", "debug", "sched"}, elem...)...)
}

// StateDir is the agent's own state directory, /var/lib/latencytier.
func (r *Root) StateDir() string { return r.Path("var", "lib", "latencytier") }

// KubeletDir is kubelet's state directory, /var/lib/kubelet.
func (r *Root) KubeletDir(elem ...string) string {
	return r.Path(append([]string{"var", "lib", "kubelet"}, elem...)...)
}

// validSysctlName reports whether name is a dotted lowercase sysctl name. It
// is the node-side copy of the CRD's rule (defence in depth): a name that
// passes can only address a file under /proc/sys.
func validSysctlName(name string) bool {
	if len(name) < 3 || len(name) > 128 || strings.Contains(name, "..") {
		return false
	}
	parts := strings.Split(name, ".")
	if len(parts) < 2 {
		return false
	}
	for i, p := range parts {
		if p == "" {
			return false
		}
		for _, c := range p {
			ok := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || (i > 0 && c == '-')
			if !ok {
				return false
			}
		}
	}
	return true
}

// SysctlPath is the /proc/sys file of a dotted sysctl name.
func (r *Root) SysctlPath(name string) (string, error) {
	if !validSysctlName(name) {
		return "", fmt.Errorf("invalid sysctl name %q", name)
	}
	return r.Proc(append([]string{"sys"}, strings.Split(name, ".")...)...), nil
}

// ReadString reads a kernel file and trims surrounding whitespace.
func (r *Root) ReadString(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// WriteString writes val to an existing kernel file in one write(2), the way
// the kernel expects (no create, no temp file). O_TRUNC is what `echo >`
// does: kernel files ignore it, and a regular file in a temp-dir root then
// holds exactly val instead of val over the tail of the old content.
func (r *Root) WriteString(path, val string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.Write([]byte(val))
	cerr := f.Close()
	return errors.Join(werr, cerr)
}

// Exists reports whether path exists.
func (r *Root) Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Inode is path's inode number: for a cgroup directory, the cgroup's
// kernfs ID on 64-bit kernels (what BPF sees as kn->id).
func (r *Root) Inode(path string) (uint64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("no inode number for %s", path)
	}
	return st.Ino, nil
}

// IsDir reports whether path is a directory.
func (r *Root) IsDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// WriteFile creates or replaces a file of the agent's own (its state
// directory), unlike WriteString, which writes an existing kernel file.
func (r *Root) WriteFile(path string, data []byte, perm os.FileMode) error {
	return os.WriteFile(path, data, perm)
}

// ReadFile reads a file under the root.
func (r *Root) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

// Subdirs lists the names of dir's subdirectories, sorted.
func (r *Root) Subdirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// ReadDir lists a directory under the root.
func (r *Root) ReadDir(path string) ([]os.DirEntry, error) { return os.ReadDir(path) }
