// Package host owns every path on the node the agent reads or writes. A Root
// is the host's filesystem root: "/" on a bare node, "/host" inside the
// DaemonSet pod, a temp dir in tests. No other package builds a /proc or /sys
// path by hand; they ask a Root.
package host

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// Root is the host filesystem root.
type Root struct {
	dir string
	// observe, when set, is told every path read through the root.
	observe atomic.Pointer[func(path string)]
}

// Observe calls fn with the path of every file read through the root
// (ReadString, ReadFile), from any goroutine, until Observe(nil): tests
// count what a pass reads.
func (r *Root) Observe(fn func(path string)) {
	if fn == nil {
		r.observe.Store(nil)
		return
	}
	r.observe.Store(&fn)
}

func (r *Root) read(path string) {
	if fn := r.observe.Load(); fn != nil {
		(*fn)(path)
	}
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
// agent creates its state directory itself, mode 0700, owned by root, and
// refuses one that is not (OwnStateDir): no one but root can plant a link
// on the paths it writes there, and it opens them without following links
// anyway (OpenOwn).
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

// ErrUnsafeStateDir marks a state directory the agent refuses to use.
var ErrUnsafeStateDir = errors.New("unsafe state directory")

// OwnStateDir creates the state directory (mode 0700) when it is missing
// and checks that it is the agent's own: a directory, not a symlink, owned
// by the agent's user (root on a node) and not writable by group or others.
// The journal in it names the files the agent writes back as root, so a
// directory someone else can write (plant a link, forge a journal) is
// refused with an error wrapping ErrUnsafeStateDir and naming the path.
func (r *Root) OwnStateDir() (string, error) {
	dir := r.StateDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create state directory %s: %w", dir, err)
	}
	return dir, checkOwnDir(dir)
}

// CheckStateDir is OwnStateDir for readers: a missing state directory is
// not created (exists false) and not an error.
func (r *Root) CheckStateDir() (dir string, exists bool, err error) {
	dir = r.StateDir()
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return dir, false, nil
	}
	return dir, true, checkOwnDir(dir)
}

func checkOwnDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	uid := os.Geteuid()
	var problem string
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		problem = "a symlink"
	case !fi.IsDir():
		problem = "not a directory"
	case st == nil:
		problem = "of unknown owner"
	case int(st.Uid) != uid:
		problem = fmt.Sprintf("owned by uid %d, not %d", st.Uid, uid)
	case fi.Mode().Perm()&0o022 != 0:
		problem = fmt.Sprintf("mode %04o, writable by group or others", fi.Mode().Perm())
	default:
		return nil
	}
	return fmt.Errorf("%w %s: %s; the agent keeps its journal there and writes it back as root, so it must be a directory owned by uid %d with no group or other write permission (chown %d %s; chmod go-w %s)",
		ErrUnsafeStateDir, dir, problem, uid, uid, dir, dir)
}

// OpenOwn opens a file of the agent's own in its state directory without
// following a symlink in its last element (O_NOFOLLOW) and refuses
// anything but a regular file, so a link or FIFO planted there is never
// written or read through.
func (r *Root) OpenOwn(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("open %s: %w (a symlink; the agent's own files are never followed)", path, err)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s: not a regular file", path)
	}
	return f, nil
}

// WriteOwn writes data as the file name of the agent's own state
// directory, atomically and durably: a temp file opened as OpenOwn opens
// (never through a symlink), synced, renamed over name, and the directory
// synced, so a crash or a reboot leaves the old content or the new, never
// a part.
func (r *Root) WriteOwn(name string, data []byte) error {
	dir, err := r.OwnStateDir()
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, name+".tmp")
	_ = os.Remove(tmp)
	f, err := r.OpenOwn(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, filepath.Join(dir, name))
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), werr)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ReadOwn reads a file of the agent's own as OpenOwn opens it.
func (r *Root) ReadOwn(path string) ([]byte, error) {
	f, err := r.OpenOwn(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

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
	r.read(path)
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
// directory), unlike WriteString, which writes an existing kernel file. It
// opens it as OpenOwn does: a symlink there is refused, not followed.
func (r *Root) WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := r.OpenOwn(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	return errors.Join(werr, f.Close())
}

// ReadFile reads a file under the root.
func (r *Root) ReadFile(path string) ([]byte, error) {
	r.read(path)
	return os.ReadFile(path)
}

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
