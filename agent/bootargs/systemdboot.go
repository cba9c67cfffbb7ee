package bootargs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"latencytier.io/latencytier/agent/host"
)

// systemd-boot takes the kernel command line of its entries from
// /etc/kernel/cmdline when kernel-install writes them (the 90-loaderentry
// plugin), so the agent stages there: the file's own content stays as it
// was and the agent's arguments follow it, then kernel-install regenerates
// the running kernel's entry on the host. Unlike GRUB's drop-in the file is
// shared with the distribution and the person: its original is kept, byte
// for byte and synced, in the agent's state directory before the first
// write, and a revert writes exactly that back.
//
// A revert regenerates the entry of every installed kernel, not only the
// running one: a kernel installed while the arguments were staged got them
// in its entry from the package manager's kernel-install run. It first
// keeps the staged file's content (KernelCmdlineRevertPending, synced),
// then writes the original back and runs kernel-install for each kernel;
// only when every run succeeded are the kept files removed. Until then the
// setting reads as still staged (Staged answers from the pending copy), so
// the engine asks for the revert again next pass, and a revert that failed
// or was interrupted half-way is run again in full instead of forgotten.
//
// A host without /etc/kernel/cmdline is not staged (Detect says
// Unsupported): kernel-install would take the running /proc/cmdline
// instead, and after a boot with the arguments a revert could not give the
// entry its old line back.

// KernelCmdline is the file kernel-install reads, relative to the root.
const KernelCmdline = "etc/kernel/cmdline"

// SettingSystemdBoot is the setting ID of arguments staged in KernelCmdline.
const SettingSystemdBoot = "boot/systemd-boot"

// SystemdBootPath is the knob path of the arguments staged for profile in
// /etc/kernel/cmdline.
func SystemdBootPath(profile string) string { return Prefix + "systemd-boot/" + profile }

// KernelCmdlineOriginal is the copy of /etc/kernel/cmdline taken before
// the agent first staged, in its state directory.
const KernelCmdlineOriginal = "kernel-cmdline.before-latencytier"

// KernelCmdlineRevertPending is the staged /etc/kernel/cmdline a revert
// under way replaces, in the state directory: present while the entries
// of some kernel may still hold the arguments.
const KernelCmdlineRevertPending = "kernel-cmdline.revert-pending"

const kernelInstallUnit = "latencytier-kernel-install.service"

// maxKernels bounds how many installed kernels a revert regenerates.
const maxKernels = 64

// kernelVersion is what an installed kernel's version (a directory or file
// name on the host, and an argument to kernel-install) may be: letters,
// digits, '.', '_', '+' and '-', starting with a letter or digit (never
// "." or ".."), at most 128 characters.
var kernelVersion = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)

// espDirs are where systemd-boot's ESP or XBOOTLDR partition is mounted
// (bootctl's search order).
var espDirs = []string{"efi", "boot", "boot/efi"}

// SystemdBoot stages and reverts arguments through /etc/kernel/cmdline and
// kernel-install on the host.
type SystemdBoot struct {
	Root *host.Root
	Run  RunFunc
}

func (s SystemdBoot) originalPath() string {
	return filepath.Join(s.Root.StateDir(), KernelCmdlineOriginal)
}

// original is the kept copy of /etc/kernel/cmdline; kept is false before
// the first stage (and after a complete revert).
func (s SystemdBoot) original() (content string, kept bool, err error) {
	if _, exists, err := s.Root.CheckStateDir(); err != nil || !exists {
		return "", false, err
	}
	b, err := s.Root.ReadOwn(s.originalPath())
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read the kept original of /%s: %w", KernelCmdline, err)
	}
	return string(b), true, nil
}

func (s SystemdBoot) pendingPath() string {
	return filepath.Join(s.Root.StateDir(), KernelCmdlineRevertPending)
}

// pending is the staged content a revert under way replaced; ok is false
// when no revert is under way.
func (s SystemdBoot) pending() (content string, ok bool, err error) {
	b, err := s.Root.ReadOwn(s.pendingPath())
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read the pending revert of /%s: %w", KernelCmdline, err)
	}
	return string(b), true, nil
}

func (s SystemdBoot) current() (string, error) {
	b, err := s.Root.ReadFile(s.Root.Path(KernelCmdline))
	if err != nil {
		return "", fmt.Errorf("read /%s: %w", KernelCmdline, err)
	}
	return string(b), nil
}

// withArgs is orig with args after its own arguments, its final newline
// kept.
func withArgs(orig string, args []Arg) string {
	body := strings.TrimRight(orig, "\n")
	nl := orig[len(body):]
	if len(args) == 0 {
		return orig
	}
	if body == "" {
		return Line(args) + nl
	}
	return body + " " + Line(args) + nl
}

// added returns the arguments cur holds after orig's own, or an error when
// cur no longer starts with orig (someone else changed the file since the
// agent staged).
func added(orig, cur string) ([]Arg, error) {
	rest, ok := strings.CutPrefix(strings.TrimRight(cur, "\n"), strings.TrimRight(orig, "\n"))
	if !ok || (rest != "" && rest[0] != ' ' && strings.TrimSpace(orig) != "") {
		return nil, fmt.Errorf("/%s changed since the agent staged (it no longer starts with the original kept in %s): leaving it",
			KernelCmdline, "/var/lib/latencytier/"+KernelCmdlineOriginal)
	}
	args := Parse(rest)
	if err := check(args); err != nil {
		return nil, fmt.Errorf("/%s: %w", KernelCmdline, err)
	}
	return args, nil
}

// Staged returns the arguments the agent added to /etc/kernel/cmdline
// (nil when it holds none). While a revert is under way (the file holds
// the original again, but some kernel's entry may not) they are those the
// revert is taking out: the setting is not reverted until every entry is.
func (s SystemdBoot) Staged() ([]Arg, error) {
	orig, kept, err := s.original()
	if err != nil || !kept {
		return nil, err
	}
	cur, err := s.current()
	if err != nil {
		return nil, err
	}
	if cur == orig {
		if p, ok, err := s.pending(); err != nil || ok {
			if err != nil {
				return nil, err
			}
			return added(orig, p)
		}
	}
	return added(orig, cur)
}

// Sources are the arguments of /etc/kernel/cmdline that are not the
// agent's, for Conflicts.
func (s SystemdBoot) Sources() ([][2]string, error) {
	orig, kept, err := s.original()
	if err != nil {
		return nil, err
	}
	if !kept {
		if orig, err = s.current(); err != nil {
			return nil, err
		}
	}
	return [][2]string{{"/" + KernelCmdline, orig}}, nil
}

// Stage adds args to /etc/kernel/cmdline (after its own arguments) and runs
// kernel-install for the running kernel. An argument the file already sets
// differently is refused before any write; the original is kept, synced,
// before the first. A failed kernel-install puts the original back, so the
// setting reads as not staged and the next pass tries again.
func (s SystemdBoot) Stage(ctx context.Context, args []Arg) (changed bool, err error) {
	if err := check(args); err != nil {
		return false, err
	}
	cur, err := s.current()
	if err != nil {
		return false, err
	}
	orig, kept, err := s.original()
	if err != nil {
		return false, err
	}
	if !kept {
		orig = cur
	} else if _, err := added(orig, cur); err != nil {
		return false, err
	}
	if cs := Conflicts(args, nil, [2]string{"/" + KernelCmdline, orig}); len(cs) > 0 {
		return false, &ConflictError{Conflicts: cs}
	}
	_, pending, err := s.pending()
	if err != nil {
		return false, err
	}
	want := withArgs(orig, args)
	if cur == want && !pending {
		return false, nil
	}
	argv, err := kernelInstall(s.Root)
	if err != nil {
		return false, err
	}
	if !kept {
		if err := s.keep(orig); err != nil {
			return false, err
		}
	}
	if err := writeAtomic(s.Root.Path(KernelCmdline), want); err != nil {
		return false, err
	}
	if err := s.Run(ctx, kernelInstallUnit, argv); err != nil {
		if rerr := writeAtomic(s.Root.Path(KernelCmdline), cur); rerr == nil {
			if !kept {
				_ = removeSynced(s.originalPath())
			}
			err = fmt.Errorf("%w (/%s put back as it was)", err, KernelCmdline)
		}
		return true, err
	}
	// Staged again: the running kernel's entry holds the arguments, and an
	// earlier revert left unfinished no longer applies.
	if pending {
		if err := removeSynced(s.pendingPath()); err != nil {
			return true, err
		}
	}
	return true, nil
}

// Revert writes the kept original back byte for byte and runs
// kernel-install for every installed kernel (the running one last);
// changed is false when nothing was staged. The staged content is kept
// (synced) before the file is written, and removed with the original only
// once every run succeeded: a revert that fails or is interrupted half-way
// reads as staged, and the next one runs every kernel again.
func (s SystemdBoot) Revert(ctx context.Context) (changed bool, err error) {
	orig, kept, err := s.original()
	if err != nil || !kept {
		return false, err
	}
	cur, err := s.current()
	if err != nil {
		return false, err
	}
	if _, err := added(orig, cur); err != nil {
		return false, err
	}
	argvs, err := kernelInstalls(s.Root)
	if err != nil {
		return false, err
	}
	if cur != orig {
		if err := s.Root.WriteOwn(KernelCmdlineRevertPending, []byte(cur)); err != nil {
			return false, fmt.Errorf("keep the staged /%s before reverting: %w", KernelCmdline, err)
		}
		if err := writeAtomic(s.Root.Path(KernelCmdline), orig); err != nil {
			return false, err
		}
	}
	for _, argv := range argvs {
		if err := s.Run(ctx, kernelInstallUnit, argv); err != nil {
			return false, fmt.Errorf("%w (kernel %s; /%s holds its original, and the revert runs kernel-install for every kernel again)", err, argv[2], KernelCmdline)
		}
	}
	if err := removeSynced(s.pendingPath()); err != nil {
		return false, err
	}
	return true, removeSynced(s.originalPath())
}

// keep writes the original into the state directory, synced.
func (s SystemdBoot) keep(orig string) error {
	if err := s.Root.WriteOwn(KernelCmdlineOriginal, []byte(orig)); err != nil {
		return fmt.Errorf("keep the original /%s before staging: %w", KernelCmdline, err)
	}
	return nil
}

// kernelInstall is the host command that regenerates the running kernel's
// entry: kernel-install add VERSION IMAGE.
func kernelInstall(root *host.Root) ([]string, error) {
	tool := toolPath(root, "kernel-install")
	if tool == "" {
		return nil, errors.New("kernel-install not found on the host")
	}
	kver, err := root.ReadString(root.Proc("sys", "kernel", "osrelease"))
	if err != nil || !kernelVersion.MatchString(kver) {
		return nil, fmt.Errorf("running kernel version %q: not usable for kernel-install (%v)", kver, err)
	}
	if img := kernelImage(root, kver); img != "" {
		return []string{tool, "add", kver, img}, nil
	}
	return nil, fmt.Errorf("no kernel image of the running kernel %s (/usr/lib/modules/%s/vmlinuz or /boot/vmlinuz-%s) for kernel-install", kver, kver, kver)
}

// kernelImage is the host path of kernel kver's image ("" when none).
func kernelImage(root *host.Root, kver string) string {
	for _, img := range []string{"usr/lib/modules/" + kver + "/vmlinuz", "lib/modules/" + kver + "/vmlinuz", "boot/vmlinuz-" + kver} {
		if root.Exists(root.Path(img)) {
			return "/" + img
		}
	}
	return ""
}

// kernelInstalls are the kernel-install commands that regenerate the entry
// of every installed kernel (an image in /usr/lib/modules/<version>,
// /lib/modules/<version> or /boot/vmlinuz-<version>), sorted by version,
// the running kernel's last. A name that is not a kernel version
// (kernelVersion) is no kernel and skipped; more than maxKernels is an
// error, not a partial revert.
func kernelInstalls(root *host.Root) ([][]string, error) {
	running, err := kernelInstall(root)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{running[2]: true}
	var versions []string
	add := func(v string) {
		if !seen[v] && kernelVersion.MatchString(v) && kernelImage(root, v) != "" {
			seen[v] = true
			versions = append(versions, v)
		}
	}
	for _, d := range []string{"usr/lib/modules", "lib/modules"} {
		names, _ := root.Subdirs(root.Path(d))
		for _, n := range names {
			add(n)
		}
	}
	boot, _ := root.ReadDir(root.Path("boot"))
	for _, e := range boot {
		if v, ok := strings.CutPrefix(e.Name(), "vmlinuz-"); ok && !e.IsDir() {
			add(v)
		}
	}
	if len(versions)+1 > maxKernels {
		return nil, fmt.Errorf("%d installed kernels, more than the %d a revert regenerates entries for", len(versions)+1, maxKernels)
	}
	sort.Strings(versions)
	out := make([][]string, 0, len(versions)+1)
	for _, v := range versions {
		out = append(out, []string{running[0], "add", v, kernelImage(root, v)})
	}
	return append(out, running), nil
}

// toolPath is the host path of an executable tool ("" when absent).
func toolPath(root *host.Root, name string) string {
	for _, d := range []string{"usr/bin", "usr/sbin", "bin", "sbin"} {
		st, err := os.Stat(root.Path(d, name))
		if err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return "/" + d + "/" + name
		}
	}
	return ""
}

// EntriesHold reports whether a systemd-boot entry of the running kernel
// has an options line ending in args; known is false when no entry of it
// can be read (the agent sees no ESP).
func EntriesHold(root *host.Root, args []Arg) (holds, known bool) {
	kver, _ := root.ReadString(root.Proc("sys", "kernel", "osrelease"))
	want := " " + Line(args)
	for _, d := range espDirs {
		files, _ := filepath.Glob(root.Path(d, "loader", "entries", "*.conf"))
		for _, f := range files {
			b, err := root.ReadFile(f)
			if err != nil || (kver != "" && !strings.Contains(string(b), kver)) {
				continue
			}
			known = true
			for _, l := range strings.Split(string(b), "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "options"); ok && strings.HasSuffix(" "+strings.TrimSpace(rest), want) {
					return true, true
				}
			}
		}
	}
	return false, known
}

// systemdBootInstalled reports whether systemd-boot is on one of the ESP
// candidates (its loader.conf or its EFI binary), or booted this kernel
// (its LoaderInfo EFI variable).
func systemdBootInstalled(root *host.Root) bool {
	if bootedBySystemdBoot(root) {
		return true
	}
	for _, d := range espDirs {
		if root.Exists(root.Path(d, "loader", "loader.conf")) {
			return true
		}
		if m, _ := filepath.Glob(root.Path(d, "EFI", "systemd", "systemd-boot*.efi")); len(m) > 0 {
			return true
		}
	}
	return false
}

// bootedBySystemdBoot: systemd-boot sets LoaderInfo ("systemd-boot 255...")
// for the kernel it starts.
func bootedBySystemdBoot(root *host.Root) bool {
	m, _ := filepath.Glob(root.Path("sys", "firmware", "efi", "efivars", "LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"))
	if len(m) == 0 {
		return false
	}
	b, err := root.ReadFile(m[0])
	if err != nil {
		return false
	}
	// efivarfs: 4 bytes of attributes, then UTF-16LE.
	var s strings.Builder
	for i := 4; i+1 < len(b); i += 2 {
		if b[i] != 0 || b[i+1] != 0 {
			s.WriteByte(b[i])
		}
	}
	return strings.HasPrefix(s.String(), "systemd-boot")
}
