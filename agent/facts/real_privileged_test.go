//go:build privileged

package facts

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/internal/privtest"
)

func TestReadThisMachine(t *testing.T) {
	root := testroot.RealKernel(t)
	f := Read(root, true, false)
	if f.Version == "" || f.OnlineCPUs == "" || f.CgroupMode == "" {
		t.Fatalf("facts = %+v", f)
	}
	t.Logf("facts: %+v", f)
}

// Real kernel: this machine's kernel is built without sched_ext, and the
// facts say so: class fair, sched_ext not supported, and Note naming why.
// The absence is checked on the real /sys first, so on a kernel with
// sched_ext this fails instead of passing on a report it did not check.
func TestThisMachineReportsTheFairClass(t *testing.T) {
	root := testroot.RealKernel(t)
	if _, err := os.Stat("/sys/kernel/sched_ext"); !os.IsNotExist(err) {
		t.Fatalf("/sys/kernel/sched_ext: %v; this test is for a kernel without sched_ext", err)
	}
	f := Read(root, true, false)
	if f.ActiveClass != "fair" || f.SchedExt == nil || f.SchedExt.Supported || f.SchedExt.Ops != "" ||
		!strings.Contains(f.SchedExt.Note, "not built into this kernel") {
		t.Fatalf("class %q, schedExt %+v; want fair, sched_ext not built in", f.ActiveClass, f.SchedExt)
	}
}

// Real processes: a copy of sleep installed at the root's
// /usr/sbin/irqbalance is irqbalance; the same binary copied anywhere else
// and run (its comm is "irqbalance" too, as a tenant's would be) is not.
func TestIRQBalanceIsTheHostBinaryNotTheName(t *testing.T) {
	root := testroot.RealKernel(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	start := func(path string) int {
		t.Helper()
		b, err := os.ReadFile(sleep)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(path, "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	real := start(root.Path("usr", "sbin", "irqbalance"))
	fake := start(filepath.Join(t.TempDir(), "irqbalance"))
	for _, pid := range []int{real, fake} {
		if comm := testroot.Read(t, root.Proc(strconv.Itoa(pid), "comm")); comm != "irqbalance" {
			t.Fatalf("pid %d comm = %q", pid, comm)
		}
	}
	var found []int
	for _, b := range IRQBalances(root) {
		found = append(found, b.PID)
	}
	if !slices.Contains(found, real) || slices.Contains(found, fake) {
		t.Fatalf("IRQBalances found pids %v; want %d (the root's binary), not %d (a renamed copy)", found, real, fake)
	}
}

// hostInitChild, when set, makes TestIRQBalanceFoundWithoutTheHostsRoot
// the child, pid 1 of new pid and mount namespaces: the "host" whose init
// it is. The value is the host root to use, hostInitBin the directory it
// bind-mounts over its /usr/local/sbin.
const (
	hostInitChild = "LT_HOST_INIT_CHILD"
	hostInitBin   = "LT_HOST_INIT_BIN"
)

// The unprivileged DaemonSet mounts the host's /proc and /sys, not its
// "/": the host root (/host) is not the host's "/". A host root holding
// only a procfs still identifies irqbalance by its executable, through the
// host init's root (proc/1/root), both running and after its binary was
// deleted (a package upgrade). The host is a pid and mount namespace the
// test makes: its pid 1 sees a copy of sleep at /usr/local/sbin/irqbalance
// (a bind mount in that namespace only), so the machine's own filesystem is
// not touched.
func TestIRQBalanceFoundWithoutTheHostsRoot(t *testing.T) {
	if dir := os.Getenv(hostInitChild); dir != "" {
		runHostInitChild(t, dir)
		return
	}
	privtest.Root(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "irqbalance"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIRQBalanceFoundWithoutTheHostsRoot$", "-test.v")
	cmd.Env = append(os.Environ(), hostInitChild+"="+t.TempDir(), hostInitBin+"="+bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestIRQBalanceFoundWithoutTheHostsRoot") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

// runHostInitChild is the host's init: its "/" is the host's "/", with the
// irqbalance binary at /usr/local/sbin; the host root dir holds only a
// procfs of this pid namespace (so its pid 1 is this process).
func runHostInitChild(t *testing.T, dir string) {
	if os.Getpid() != 1 {
		t.Fatalf("child is pid %d, not 1 of a new pid namespace", os.Getpid())
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(os.Getenv(hostInitBin), "/usr/local/sbin", "", unix.MS_BIND, ""); err != nil {
		privtest.Missing(t, "a /usr/local/sbin to bind over: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("proc", filepath.Join(dir, "proc"), "proc", 0, ""); err != nil {
		t.Fatal(err)
	}
	root := host.New(dir)
	if _, err := os.Stat(root.Path("usr", "local", "sbin")); err == nil {
		t.Fatal("the host root holds the host's /usr: the test proves nothing")
	}
	cmd := exec.Command("/usr/local/sbin/irqbalance", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	found := func() []int {
		var pids []int
		for _, b := range IRQBalances(root) {
			pids = append(pids, b.PID)
		}
		return pids
	}
	if got := found(); !slices.Contains(got, cmd.Process.Pid) {
		t.Fatalf("IRQBalances through a host root without the host's / = pids %v, want %d", got, cmd.Process.Pid)
	}
	if err := os.Remove("/usr/local/sbin/irqbalance"); err != nil {
		t.Fatal(err)
	}
	link, err := os.Readlink(root.Proc(strconv.Itoa(cmd.Process.Pid), "exe"))
	if err != nil || !strings.HasSuffix(link, " (deleted)") {
		t.Fatalf("exe after the binary was removed = %q, %v; want a deleted link", link, err)
	}
	if got := found(); !slices.Contains(got, cmd.Process.Pid) {
		t.Fatalf("IRQBalances after the binary was deleted = pids %v, want %d", got, cmd.Process.Pid)
	}
}
