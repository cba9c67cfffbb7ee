//go:build privileged

package vmtest

import (
	"bufio"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/irq"
	"latencytier.io/latencytier/agent/irqbalance"
	"latencytier.io/latencytier/agent/systemd"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// irqbalanceRow is the one row that runs the irqbalance test: the
// fallback depends on systemd and irqbalance (the same bookworm userland
// in every row), not on the kernel, and each restart of irqbalance costs
// an emulated daemon-reload; the 6.12 row has four CPUs to ban three.
const irqbalanceRow = "6.12-cgroup2"

// noSocketDropIn is the test's own override of irqbalance.service: no
// RuntimeDirectory=, so systemd does not create /run/irqbalance, and the
// unit's ReadOnlyPaths=/ keeps irqbalance from making it. irqbalance 1.9
// then fails to bind /run/irqbalance/irqbalance<pid>.sock and listens on an
// autobound abstract socket instead (irqbalance.c, init_socket), which the
// agent cannot find: the node the fallback is for.
const noSocketDropIn = "/run/systemd/system/irqbalance.service.d/40-latencytier-vmtest-nosocket.conf"

// Debian's irqbalance under real systemd, without its control socket: the
// agent's irq setting bans the CPUs outside the reserved one through a
// runtime drop-in of irqbalance.service (daemon-reload, try-restart), the
// restarted irqbalance's environment carries the ban, a second pass
// restarts nothing, and revert removes the drop-in and restarts irqbalance
// with the environment it had before.
func TestIRQBalanceWithoutSocketBannedThroughItsUnit(t *testing.T) {
	root, row := vm(t)
	if row != irqbalanceRow {
		t.Skipf("runs in the %s row only (systemd and irqbalance are the same in every row)", irqbalanceRow)
	}
	if _, err := os.Stat("/usr/sbin/irqbalance"); err != nil {
		t.Fatalf("Debian's irqbalance is not in the guest (hack/vm/rootfs.sh): %v", err)
	}
	if ibs := facts.IRQBalances(root); len(ibs) > 0 {
		t.Fatalf("irqbalance already runs (pid %d): hack/vm/rootfs.sh disables it, the test starts its own", ibs[0].PID)
	}
	if _, err := os.Stat("/run/irqbalance"); err == nil {
		t.Fatal("/run/irqbalance exists before irqbalance started: the test could not take its socket away")
	}
	online, err := cpulist.Online(root)
	if err != nil || online.Size() < 2 || !online.Contains(0) {
		t.Fatalf("online CPUs %s (%v): want CPU 0 and another", online, err)
	}
	reserved := cpuset.New(0)
	want := online.Difference(reserved)
	const agentDropIn = "/run/systemd/system/irqbalance.service.d/50-latencytier.conf" // docs/coexistence.md

	restoreIRQs(t)
	t.Cleanup(func() {
		systemctl(t, "stop", irqbalance.Unit)
		_ = os.Remove(noSocketDropIn)
		_ = os.Remove(agentDropIn)
		_ = os.Remove(filepath.Dir(noSocketDropIn))
		systemctl(t, "daemon-reload")
	})
	if err := os.MkdirAll(filepath.Dir(noSocketDropIn), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(noSocketDropIn, []byte("[Service]\nRuntimeDirectory=\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	systemctl(t, "daemon-reload")
	systemctl(t, "start", irqbalance.Unit)
	pid0 := mainIRQBalance(t, root, 0)
	abstractOnly(t, root, pid0)
	env0 := stableEnv(t, root, pid0)
	t.Logf("irqbalance (pid %d) without its file socket, environment %v", pid0, env0)
	if v, ok := env0["IRQBALANCE_BANNED_CPULIST"]; ok {
		t.Fatalf("irqbalance started with IRQBALANCE_BANNED_CPULIST=%s; the test needs it unbanned", v)
	}

	e := engine(root)
	t.Cleanup(func() { _, _ = e.Revert() })
	rep := applyIRQ(t, e, root, reserved)
	r := settingResult(rep, irqbalance.BanID)
	if r.State != v1alpha1.SettingApplied || !strings.Contains(r.Message, "runtime drop-in") {
		t.Fatalf("%s = %+v, want Applied through the runtime drop-in", irqbalance.BanID, r)
	}
	pid1 := mainIRQBalance(t, root, pid0)
	if got := stableEnv(t, root, pid1)["IRQBALANCE_BANNED_CPULIST"]; got != want.String() {
		t.Fatalf("restarted irqbalance (pid %d) has IRQBALANCE_BANNED_CPULIST=%q, want %q", pid1, got, want)
	}
	abstractOnly(t, root, pid1)
	t.Logf("applied: %s; irqbalance restarted as pid %d with IRQBALANCE_BANNED_CPULIST=%s", r.Message, pid1, want)
	svc := service(t, root)
	if !slices.Contains(svc.DropInPaths, agentDropIn) || !slices.Contains(svc.DropInPaths, noSocketDropIn) {
		t.Errorf("systemd loaded drop-ins %v, want the agent's %s beside the test's", svc.DropInPaths, agentDropIn)
	}
	written := inode(t, agentDropIn)

	// The second pass: the drop-in holds, nothing is rewritten or restarted.
	rep = applyIRQ(t, e, root, reserved)
	if r := settingResult(rep, irqbalance.BanID); r.State != v1alpha1.SettingApplied {
		t.Errorf("second pass: %s = %+v, want Applied", irqbalance.BanID, r)
	}
	for _, d := range rep.Drifts {
		if d.ID == irqbalance.BanID {
			t.Errorf("second pass: the ban drifted: ours %q, theirs %q", d.Ours, d.Theirs)
		}
	}
	if pid := service(t, root).MainPID; pid != pid1 {
		t.Errorf("second pass: irqbalance's main pid %d, want %d (no restart)", pid, pid1)
	}
	if now := inode(t, agentDropIn); now != written {
		t.Errorf("second pass rewrote %s (inode %d, was %d)", agentDropIn, now, written)
	}
	t.Logf("second pass: %d writes, %d drifts (IRQs irqbalance placed within CPU 0 are not drift)", rep.Written, len(rep.Drifts))

	rep, err = e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	if r := settingResult(rep, irqbalance.BanID); r.State != v1alpha1.SettingReverted {
		t.Errorf("revert: %s = %+v, want Reverted", irqbalance.BanID, r)
	}
	if _, err := os.Stat(agentDropIn); !os.IsNotExist(err) {
		t.Errorf("%s after revert: %v, want it gone", agentDropIn, err)
	}
	pid3 := mainIRQBalance(t, root, pid1)
	if slices.Contains(service(t, root).DropInPaths, agentDropIn) {
		t.Errorf("systemd still has %s loaded after revert", agentDropIn)
	}
	if env3 := stableEnv(t, root, pid3); !maps.Equal(env3, env0) {
		t.Errorf("irqbalance (pid %d) after revert has environment %v, want the original %v", pid3, env3, env0)
	}
	t.Logf("reverted: %s; irqbalance restarted as pid %d with its original environment", settingResult(rep, irqbalance.BanID).Message, pid3)
}

// applyIRQ is one agent pass of the irq setting: irqbalance's ban, then
// default_smp_affinity and every IRQ, steered to reserved.
func applyIRQ(t *testing.T, e *apply.Engine, root *host.Root, reserved cpuset.CPUSet) apply.Report {
	t.Helper()
	knobs, err := irq.Knobs(root, reserved)
	if err != nil {
		t.Fatal(err)
	}
	if len(knobs) == 0 || knobs[0].ID != irqbalance.BanID || !irqbalance.IsDropInPath(knobs[0].Path) {
		t.Fatalf("first knob %+v, want irqbalance's ban through its unit's drop-in", knobs[:min(1, len(knobs))])
	}
	rep, err := e.Apply(apply.Meta{Profile: "vm"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func settingResult(rep apply.Report, id string) v1alpha1.SettingResult {
	for _, r := range append(rep.Results, rep.Restored...) {
		if r.Setting == id {
			return r
		}
	}
	return v1alpha1.SettingResult{}
}

func systemctl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("systemctl", args...).CombinedOutput(); err != nil {
		t.Errorf("systemctl %s: %v %s", strings.Join(args, " "), err, out)
	}
}

func service(t *testing.T, root *host.Root) systemd.Service {
	t.Helper()
	s, err := systemd.ReadService(root, irqbalance.Unit)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mainIRQBalance waits until irqbalance.service is active with a main
// process other than not that runs the host's irqbalance (systemd knows the
// pid from the fork, before the exec), and returns its pid.
func mainIRQBalance(t *testing.T, root *host.Root, not int) int {
	t.Helper()
	var s systemd.Service
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		s = service(t, root)
		if s.ActiveState != "active" || s.MainPID == 0 || s.MainPID == not {
			continue
		}
		for _, ib := range facts.IRQBalances(root) {
			if ib.PID == s.MainPID {
				return s.MainPID
			}
		}
	}
	out, _ := exec.Command("journalctl", "--no-pager", "-n", "20", "-u", irqbalance.Unit).CombinedOutput()
	t.Fatalf("%s: %s, main pid %d (not %d) never ran irqbalance; its journal:\n%s", irqbalance.Unit, s.ActiveState, s.MainPID, not, out)
	return 0
}

// abstractOnly waits until irqbalance pid listens on its UI socket and
// checks that it is the abstract one: the file socket the agent looks for
// is absent.
func abstractOnly(t *testing.T, root *host.Root, pid int) {
	t.Helper()
	var names []string
	for deadline := time.Now().Add(30 * time.Second); len(names) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		names = listening(t, pid)
	}
	if len(names) != 1 || !strings.HasPrefix(names[0], "@") {
		t.Fatalf("irqbalance (pid %d) listens on unix sockets %q, want one abstract socket (@...)", pid, names)
	}
	t.Logf("irqbalance (pid %d) listens on the abstract socket %s only", pid, names[0])
	if s := irqbalance.Socket(root, pid); s != "" {
		t.Fatalf("irqbalance (pid %d) has its control socket %s; the test wanted it without", pid, s)
	}
}

// listening lists the unix sockets process pid listens on, by bound name
// (abstract ones start with "@"), from its fds and /proc/net/unix.
func listening(t *testing.T, pid int) []string {
	t.Helper()
	fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
		if in, ok := strings.CutPrefix(l, "socket:["); ok {
			inodes[strings.TrimSuffix(in, "]")] = true
		}
	}
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Num RefCount Protocol Flags Type St Inode [Path]; Flags
		// 00010000 is __SO_ACCEPTCON, a listening socket.
		fl := strings.Fields(sc.Text())
		if len(fl) >= 8 && fl[3] == "00010000" && inodes[fl[6]] {
			out = append(out, fl[7])
		}
	}
	return out
}

// stableEnv is process pid's environment without what systemd sets anew
// for each start (invocation id, journal stream, exec pid).
func stableEnv(t *testing.T, root *host.Root, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(root.Proc(strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "INVOCATION_ID" && k != "JOURNAL_STREAM" && k != "SYSTEMD_EXEC_PID" {
			env[k] = v
		}
	}
	return env
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// restoreIRQs puts every IRQ's affinity and default_smp_affinity back as
// they are now once the test ends (irqbalance moves them all; cleanups run
// newest first, so this runs after irqbalance is stopped).
func restoreIRQs(t *testing.T) {
	t.Helper()
	paths, _ := filepath.Glob("/proc/irq/*/smp_affinity_list")
	for _, p := range append(paths, "/proc/irq/default_smp_affinity") {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		orig := strings.TrimSpace(string(b))
		t.Cleanup(func() {
			if cur, _ := os.ReadFile(p); strings.TrimSpace(string(cur)) != orig {
				_ = os.WriteFile(p, []byte(orig), 0) // immovable IRQs refuse, as before
			}
		})
	}
}
