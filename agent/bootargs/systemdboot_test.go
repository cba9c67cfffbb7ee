package bootargs_test

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/bootargs/bootargstest"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
)

const origCmdline = "root=UUID=1234 ro  quiet\n" // two spaces: kept byte for byte

func sdbootHost(t *testing.T, cmdline string) (*host.Root, *bootargstest.KernelInstall) {
	t.Helper()
	root := testroot.Files(t, bootargstest.SystemdBootFiles(cmdline))
	if err := bootargstest.MakeKernelInstallExecutable(root); err != nil {
		t.Fatal(err)
	}
	if b := bootargs.Detect(root); b.Kind != bootargs.KindSystemdBoot {
		t.Fatalf("detected %s (%s), want systemd-boot", b.Kind, b.Reason)
	}
	return root, &bootargstest.KernelInstall{Root: root}
}

func sdArgs(t *testing.T) []bootargs.Arg {
	t.Helper()
	args, err := bootargs.Derive(cpuset.New(0, 1, 2, 3), cpuset.New(0, 1), cpuset.New(2, 3), bootargs.Extras{SkewTick: true})
	if err != nil {
		t.Fatal(err)
	}
	return args
}

func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSystemdBootStageRevert: staging appends the arguments to
// /etc/kernel/cmdline after its own, keeps the original first and runs
// kernel-install for the running kernel through the RunFunc (systemd on
// the host); the entry's options then end in the arguments. A second stage
// writes nothing; revert writes the original back byte for byte and runs
// kernel-install again.
func TestSystemdBootStageRevert(t *testing.T) {
	root, ki := sdbootHost(t, origCmdline)
	ctx := context.Background()
	sb := bootargs.SystemdBoot{Root: root, Run: ki.Run}
	args := sdArgs(t)
	changed, err := sb.Stage(ctx, args)
	if err != nil || !changed {
		t.Fatalf("stage: changed %v, %v", changed, err)
	}
	want := "root=UUID=1234 ro  quiet " + bootargs.Line(args) + "\n"
	if got := raw(t, root.Path(bootargs.KernelCmdline)); got != want {
		t.Fatalf("/etc/kernel/cmdline %q, want %q", got, want)
	}
	if got := raw(t, root.Path("var/lib/latencytier", bootargs.KernelCmdlineOriginal)); got != origCmdline {
		t.Errorf("kept original %q, want %q", got, origCmdline)
	}
	if len(ki.Runs) != 1 || ki.Runs[0] != "latencytier-kernel-install.service /usr/bin/kernel-install add 6.12.0-test /usr/lib/modules/6.12.0-test/vmlinuz" {
		t.Errorf("kernel-install runs %q", ki.Runs)
	}
	if holds, known := bootargs.EntriesHold(root, args); !holds || !known {
		t.Errorf("the entry does not end in the arguments (holds %v known %v)", holds, known)
	}
	if staged, err := sb.Staged(); err != nil || bootargs.Line(staged) != bootargs.Line(args) {
		t.Errorf("staged %q, %v", bootargs.Line(staged), err)
	}
	if changed, err := sb.Stage(ctx, args); err != nil || changed || ki.Count() != 1 {
		t.Errorf("restage: changed %v, %v, kernel-install ran %d times", changed, err, ki.Count())
	}
	changed, err = sb.Revert(ctx)
	if err != nil || !changed {
		t.Fatalf("revert: changed %v, %v", changed, err)
	}
	if got := raw(t, root.Path(bootargs.KernelCmdline)); got != origCmdline {
		t.Errorf("/etc/kernel/cmdline after revert %q, want %q byte for byte", got, origCmdline)
	}
	if root.Exists(root.Path("var/lib/latencytier", bootargs.KernelCmdlineOriginal)) {
		t.Error("the kept original is left after the revert")
	}
	if holds, _ := bootargs.EntriesHold(root, args); holds || ki.Count() != 2 {
		t.Errorf("after revert the entry still holds the arguments (%v) or kernel-install ran %d times, want 2", holds, ki.Count())
	}
	if changed, err := sb.Revert(ctx); err != nil || changed || ki.Count() != 2 {
		t.Errorf("second revert: changed %v, %v", changed, err)
	}
}

// TestSystemdBootKnob: the engine's Read and Write of the systemd-boot
// knob path: "" before, the line after, "" again after Write("").
func TestSystemdBootKnob(t *testing.T) {
	root, ki := sdbootHost(t, origCmdline)
	ctx := context.Background()
	p := bootargs.SystemdBootPath("trading")
	line := bootargs.Line(sdArgs(t))
	if v, err := bootargs.Read(root, p); err != nil || v != "" {
		t.Fatalf("read before: %q, %v", v, err)
	}
	if err := bootargs.Write(ctx, root, p, line, ki.Run); err != nil {
		t.Fatal(err)
	}
	if v, err := bootargs.Read(root, p); err != nil || v != line {
		t.Fatalf("read after stage: %q, %v", v, err)
	}
	if err := bootargs.Write(ctx, root, p, "", ki.Run); err != nil {
		t.Fatal(err)
	}
	if v, err := bootargs.Read(root, p); err != nil || v != "" || raw(t, root.Path(bootargs.KernelCmdline)) != origCmdline {
		t.Fatalf("read after revert: %q, %v", v, err)
	}
	if _, err := bootargs.Read(root, bootargs.Prefix+"systemd-boot/../x"); err == nil {
		t.Error("a path with a bad profile name was read")
	}
}

// TestSystemdBootConflictWritesNothing: an argument /etc/kernel/cmdline
// already sets differently is refused, nothing written, kernel-install
// not run.
func TestSystemdBootConflictWritesNothing(t *testing.T) {
	root, ki := sdbootHost(t, "root=/dev/vda irqaffinity=0\n")
	before := files(t, root.Dir())
	_, err := bootargs.SystemdBoot{Root: root, Run: ki.Run}.Stage(context.Background(), sdArgs(t))
	var ce *bootargs.ConflictError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "irqaffinity=0 in /etc/kernel/cmdline, not irqaffinity=0-1") {
		t.Fatalf("err %v, want the conflict named", err)
	}
	if after := files(t, root.Dir()); !maps.Equal(before, after) || ki.Count() != 0 {
		t.Errorf("a refused stage wrote (%v) or ran kernel-install %d times", !maps.Equal(before, after), ki.Count())
	}
}

// TestSystemdBootFailedKernelInstall: a failed kernel-install puts the
// file back as it was and keeps no copy, so the next pass stages again.
func TestSystemdBootFailedKernelInstall(t *testing.T) {
	root, ki := sdbootHost(t, origCmdline)
	ki.Fail = errors.New("exit status 1")
	sb := bootargs.SystemdBoot{Root: root, Run: ki.Run}
	if _, err := sb.Stage(context.Background(), sdArgs(t)); err == nil || !strings.Contains(err.Error(), "put back as it was") {
		t.Fatalf("err %v", err)
	}
	if got := raw(t, root.Path(bootargs.KernelCmdline)); got != origCmdline {
		t.Errorf("/etc/kernel/cmdline %q after a failed kernel-install", got)
	}
	if staged, err := sb.Staged(); err != nil || staged != nil || root.Exists(root.Path("var/lib/latencytier", bootargs.KernelCmdlineOriginal)) {
		t.Errorf("staged %v, %v after a failed kernel-install", staged, err)
	}
}

// TestSystemdBootEditedSinceStaging: someone rewrote the file after the
// agent staged; revert leaves it (their edit) and says so.
func TestSystemdBootEditedSinceStaging(t *testing.T) {
	root, ki := sdbootHost(t, origCmdline)
	sb := bootargs.SystemdBoot{Root: root, Run: ki.Run}
	if _, err := sb.Stage(context.Background(), sdArgs(t)); err != nil {
		t.Fatal(err)
	}
	testroot.Write(t, root.Path(bootargs.KernelCmdline), "root=/dev/sda2 ro\n")
	if _, err := sb.Revert(context.Background()); err == nil || !strings.Contains(err.Error(), "changed since the agent staged") {
		t.Fatalf("revert of an edited file: %v", err)
	}
	if got := raw(t, root.Path(bootargs.KernelCmdline)); got != "root=/dev/sda2 ro\n" {
		t.Errorf("the person's edit was overwritten: %q", got)
	}
}

// raw is a file's bytes (testroot.Read trims them).
func raw(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSystemdBootFailedRevertRetried: a kernel-install that fails during
// the revert leaves the file staged (as the entries are), so the next
// revert runs kernel-install again and ends with the original.
func TestSystemdBootFailedRevertRetried(t *testing.T) {
	root, ki := sdbootHost(t, origCmdline)
	sb := bootargs.SystemdBoot{Root: root, Run: ki.Run}
	args := sdArgs(t)
	if _, err := sb.Stage(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	ki.Fail = errors.New("exit status 1")
	if _, err := sb.Revert(context.Background()); err == nil {
		t.Fatal("a failed kernel-install reverted without error")
	}
	if staged, err := sb.Staged(); err != nil || bootargs.Line(staged) != bootargs.Line(args) {
		t.Fatalf("after a failed revert: staged %q, %v; want still staged", bootargs.Line(staged), err)
	}
	ki.Fail = nil
	if changed, err := sb.Revert(context.Background()); err != nil || !changed {
		t.Fatalf("retried revert: %v %v", changed, err)
	}
	if got := raw(t, root.Path(bootargs.KernelCmdline)); got != origCmdline || ki.Count() != 3 {
		t.Errorf("after the retry %q, kernel-install runs %d (want the original and 3)", got, ki.Count())
	}
	if holds, _ := bootargs.EntriesHold(root, args); holds {
		t.Error("the entry keeps the arguments after the retried revert")
	}
}

// entryOptions is the options line of kernel kver's entry the fake
// kernel-install wrote ("" when it has none).
func entryOptions(t *testing.T, root *host.Root, kver string) string {
	t.Helper()
	b, err := os.ReadFile(root.Path("boot/efi/loader/entries", "machine-"+kver+".conf"))
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "options "); ok {
			return rest
		}
	}
	return ""
}

// installKernel installs kernel kver while the arguments are staged: its
// image, and its entry written by the package manager's kernel-install
// run (from /etc/kernel/cmdline as it is then).
func installKernel(t *testing.T, root *host.Root, ki *bootargstest.KernelInstall, image, kver string) {
	t.Helper()
	testroot.Write(t, root.Path(image), "kernel")
	if err := ki.Run(context.Background(), "apt", []string{"/usr/bin/kernel-install", "add", kver, "/" + image}); err != nil {
		t.Fatal(err)
	}
}

// TestSystemdBootRevertRegeneratesEveryKernel: kernels installed while the
// arguments were staged got them in their entries; the revert runs
// kernel-install for every installed kernel (the running one last), so no
// entry keeps them. A kernel version with '_' is one; a name under
// /usr/lib/modules that is no kernel version is skipped.
func TestSystemdBootRevertRegeneratesEveryKernel(t *testing.T) {
	root, ki := sdbootHost(t, origCmdline)
	sb := bootargs.SystemdBoot{Root: root, Run: ki.Run}
	args := sdArgs(t)
	if _, err := sb.Stage(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	installKernel(t, root, ki, "usr/lib/modules/6.13.0-new/vmlinuz", "6.13.0-new")
	installKernel(t, root, ki, "boot/vmlinuz-6.6.0_rt1-custom", "6.6.0_rt1-custom")
	testroot.Write(t, root.Path("usr/lib/modules/not a kernel;rm/vmlinuz"), "x")
	staged := "root=UUID=1234 ro  quiet " + bootargs.Line(args)
	for _, k := range []string{"6.12.0-test", "6.13.0-new", "6.6.0_rt1-custom"} {
		if got := entryOptions(t, root, k); got != staged {
			t.Fatalf("entry of %s while staged: %q", k, got)
		}
	}
	before := ki.Count()
	if changed, err := sb.Revert(context.Background()); err != nil || !changed {
		t.Fatalf("revert: %v %v", changed, err)
	}
	for _, k := range []string{"6.12.0-test", "6.13.0-new", "6.6.0_rt1-custom"} {
		if got := entryOptions(t, root, k); got != strings.TrimSpace(origCmdline) {
			t.Errorf("entry of %s after revert: %q, want the original %q", k, got, strings.TrimSpace(origCmdline))
		}
	}
	runs := ki.Runs[before:]
	want := []string{
		"latencytier-kernel-install.service /usr/bin/kernel-install add 6.13.0-new /usr/lib/modules/6.13.0-new/vmlinuz",
		"latencytier-kernel-install.service /usr/bin/kernel-install add 6.6.0_rt1-custom /boot/vmlinuz-6.6.0_rt1-custom",
		"latencytier-kernel-install.service /usr/bin/kernel-install add 6.12.0-test /usr/lib/modules/6.12.0-test/vmlinuz",
	}
	if strings.Join(runs, "\n") != strings.Join(want, "\n") {
		t.Errorf("revert ran\n%s\nwant\n%s", strings.Join(runs, "\n"), strings.Join(want, "\n"))
	}
}

// TestSystemdBootKernelVersions: a running kernel whose version holds '_'
// stages; versions are still an allowlist, so one with a space, a slash or
// a leading dot is refused before anything is written.
func TestSystemdBootKernelVersions(t *testing.T) {
	for _, c := range []struct {
		kver string
		ok   bool
	}{
		{"6.6.0_rt1-amd64", true},
		{"6.1.0+", true},
		{"6.1.0 rm", false},
		{"../6.1.0", false},
		{".hidden", false},
		{"6.1;reboot", false},
	} {
		t.Run(c.kver, func(t *testing.T) {
			fs := bootargstest.SystemdBootFiles(origCmdline)
			fs["proc/sys/kernel/osrelease"] = c.kver + "\n"
			fs["boot/vmlinuz-"+strings.ReplaceAll(c.kver, "/", "_")] = "kernel"
			root := testroot.Files(t, fs)
			if err := bootargstest.MakeKernelInstallExecutable(root); err != nil {
				t.Fatal(err)
			}
			ki := &bootargstest.KernelInstall{Root: root}
			_, err := bootargs.SystemdBoot{Root: root, Run: ki.Run}.Stage(context.Background(), sdArgs(t))
			if c.ok && (err != nil || ki.Count() != 1) {
				t.Fatalf("stage with kernel %q: %v, kernel-install ran %d times", c.kver, err, ki.Count())
			}
			if !c.ok && (err == nil || !strings.Contains(err.Error(), "not usable for kernel-install") || ki.Count() != 0) {
				t.Fatalf("stage with kernel %q: %v, kernel-install ran %d times; want it refused", c.kver, err, ki.Count())
			}
			if !c.ok && raw(t, root.Path(bootargs.KernelCmdline)) != origCmdline {
				t.Error("a refused stage wrote /etc/kernel/cmdline")
			}
		})
	}
}

// TestSystemdBootHalfFailedRevertRetried: kernel-install fails for one
// kernel half-way through a revert. The setting still reads as staged, so
// the engine asks for the revert again; the next revert runs every kernel
// again and only then drops the kept files.
func TestSystemdBootHalfFailedRevertRetried(t *testing.T) {
	root, ki := sdbootHost(t, origCmdline)
	sb := bootargs.SystemdBoot{Root: root, Run: ki.Run}
	args := sdArgs(t)
	if _, err := sb.Stage(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	installKernel(t, root, ki, "usr/lib/modules/6.13.0-new/vmlinuz", "6.13.0-new")
	ki.FailFor = "6.12.0-test"
	if _, err := sb.Revert(context.Background()); err == nil || !strings.Contains(err.Error(), "6.12.0-test") {
		t.Fatalf("revert with a failing kernel-install: %v", err)
	}
	if v, err := bootargs.Read(root, bootargs.SystemdBootPath("p")); err != nil || v != bootargs.Line(args) {
		t.Fatalf("after a half-failed revert the setting reads %q, %v; want still staged", v, err)
	}
	ki.FailFor = ""
	if changed, err := sb.Revert(context.Background()); err != nil || !changed {
		t.Fatalf("retried revert: %v %v", changed, err)
	}
	for _, k := range []string{"6.12.0-test", "6.13.0-new"} {
		if got := entryOptions(t, root, k); got != strings.TrimSpace(origCmdline) {
			t.Errorf("entry of %s after the retried revert: %q", k, got)
		}
	}
	if v, err := bootargs.Read(root, bootargs.SystemdBootPath("p")); err != nil || v != "" {
		t.Errorf("after the retried revert the setting reads %q, %v", v, err)
	}
	for _, f := range []string{bootargs.KernelCmdlineOriginal, bootargs.KernelCmdlineRevertPending} {
		if root.Exists(root.Path("var/lib/latencytier", f)) {
			t.Errorf("%s left after a complete revert", f)
		}
	}
}

// errCrash stands for the agent dying in the middle of a revert.
var errCrash = errors.New("crash")

// TestSystemdBootInterruptedRevertRerun: the agent dies after writing the
// original back and before kernel-install ran. The next pass reads the
// setting as still staged and its revert regenerates the entry, instead of
// finding the file reverted and forgetting the entry.
func TestSystemdBootInterruptedRevertRerun(t *testing.T) {
	root, ki := sdbootHost(t, origCmdline)
	args := sdArgs(t)
	if _, err := (bootargs.SystemdBoot{Root: root, Run: ki.Run}).Stage(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	crashing := bootargs.SystemdBoot{Root: root, Run: func(context.Context, string, []string) error { panic(errCrash) }}
	func() {
		defer func() {
			if r := recover(); r != errCrash {
				panic(r)
			}
		}()
		_, _ = crashing.Revert(context.Background())
	}()
	if got := raw(t, root.Path(bootargs.KernelCmdline)); got != origCmdline {
		t.Fatalf("the crash came before the file was written back: %q", got)
	}
	if v, err := bootargs.Read(root, bootargs.SystemdBootPath("p")); err != nil || v != bootargs.Line(args) {
		t.Fatalf("after an interrupted revert the setting reads %q, %v; want still staged", v, err)
	}
	if err := bootargs.Write(context.Background(), root, bootargs.SystemdBootPath("p"), "", ki.Run); err != nil {
		t.Fatal(err)
	}
	if got := entryOptions(t, root, "6.12.0-test"); got != strings.TrimSpace(origCmdline) {
		t.Errorf("entry after the rerun revert: %q, want the original", got)
	}
}

// TestSystemdBootSyncsDirectories: every rename, create and remove the
// agent makes is followed by an fsync of its directory: /etc/kernel when
// the file is written (stage, revert), the state directory when the kept
// copies are removed.
func TestSystemdBootSyncsDirectories(t *testing.T) {
	root, ki := sdbootHost(t, origCmdline)
	var synced []string
	defer bootargs.SetSyncDirHook(func(dir string) { synced = append(synced, dir) })()
	sb := bootargs.SystemdBoot{Root: root, Run: ki.Run}
	etc, state := root.Path("etc/kernel"), root.Path("var/lib/latencytier")
	if _, err := sb.Stage(context.Background(), sdArgs(t)); err != nil {
		t.Fatal(err)
	}
	if strings.Join(synced, " ") != etc {
		t.Errorf("stage synced %q, want %s", synced, etc)
	}
	synced = nil
	if _, err := sb.Revert(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := etc + " " + state + " " + state; strings.Join(synced, " ") != want {
		t.Errorf("revert synced %q, want %s", synced, want)
	}
}
