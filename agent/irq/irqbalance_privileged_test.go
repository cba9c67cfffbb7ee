//go:build privileged

package irq

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/irqbalance"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
	"latencytier.io/latencytier/internal/privtest"
)

// balanceInterval is the irqbalance interval the tests run it with (-t): one
// second, so the ten passes watched below are what 100 s of its default
// 10 s interval would be.
const balanceInterval = 1

// startIRQBalance runs Debian's irqbalance in the foreground, as its
// systemd unit does, with a one-second interval, and waits for its control
// socket. It fails when another irqbalance already runs (unless starting a replacement:
// the test's own, being replaced). Every IRQ affinity is restored after it is killed (t.Cleanup runs
// newest first: the kill, then the restores registered before it).
func startIRQBalance(t *testing.T, starting bool) (pid int, sock string) {
	t.Helper()
	bin := "/usr/sbin/irqbalance"
	if _, err := os.Stat(bin); err != nil {
		privtest.Missing(t, "Debian's irqbalance is not installed (hack/apt-packages.txt)")
	}
	if ibs := facts.IRQBalances(host.New("/")); len(ibs) > 0 && !starting {
		privtest.Missing(t, "an irqbalance already runs (pid %d): stop it (systemctl disable --now irqbalance), the tests start their own", ibs[0].PID)
	}
	if _, err := os.Stat("/run/irqbalance"); os.IsNotExist(err) {
		// systemd's RuntimeDirectory=irqbalance/ makes it; without systemd
		// as init the test does.
		if err := os.Mkdir("/run/irqbalance", 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove("/run/irqbalance") })
	}
	cmd := exec.Command(bin, "--foreground", "-t", strconv.Itoa(balanceInterval))
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid = cmd.Process.Pid
	sock = fmt.Sprintf("/run/irqbalance/irqbalance%d.sock", pid)
	t.Cleanup(func() {
		// SIGTERM: irqbalance exits its loop and removes its socket.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = os.Remove(sock)
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := irqbalance.ReadSetup(sock); err == nil {
			return pid, sock
		} else if time.Now().After(deadline) {
			t.Fatalf("irqbalance (pid %d) never answered on %s: %v", pid, sock, err)
		}
	}
}

// realRoot is testroot.RealKernel with the host's /usr, as the agent's
// DaemonSet mounts it: facts knows irqbalance by its binary there.
func realRoot(t *testing.T) *host.Root {
	t.Helper()
	root := testroot.RealKernel(t)
	if err := os.Symlink("/usr", root.Path("usr")); err != nil {
		t.Fatal(err)
	}
	return root
}

// restoreAllIRQs registers the restore of every IRQ's affinity and
// default_smp_affinity (irqbalance moves them all).
func restoreAllIRQs(t *testing.T) {
	t.Helper()
	testroot.Restore(t, "/proc/irq/default_smp_affinity")
	paths, _ := filepath.Glob("/proc/irq/*/smp_affinity_list")
	for _, p := range paths {
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

// banned is what irqbalance at sock bans now.
func banned(t *testing.T, sock string) cpuset.CPUSet {
	t.Helper()
	s, err := irqbalance.ReadSetup(sock)
	if err != nil {
		t.Fatal(err)
	}
	return s.Banned
}

func result(rep apply.Report, id string) v1alpha1.SettingResult {
	for _, r := range rep.Results {
		if r.Setting == id {
			return r
		}
	}
	return v1alpha1.SettingResult{}
}

// watch runs an agent pass (render, apply) every second for n seconds and
// fails on any IRQ drift re-asserted or IRQ affinity written.
func watch(t *testing.T, e *apply.Engine, root *host.Root, reserved cpuset.CPUSet, seconds int) {
	t.Helper()
	for i := 0; i < seconds; i++ {
		time.Sleep(time.Second)
		knobs, err := Knobs(root, reserved)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := e.Apply(apply.Meta{Profile: "irqbalance-test"}, knobs)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range rep.Drifts {
			t.Errorf("second %d: drift re-asserted on %s: irqbalance set %q, ours %q", i+1, d.ID, d.Theirs, d.Ours)
		}
		if rep.Written != 0 {
			t.Errorf("second %d: the pass wrote %d values, want 0", i+1, rep.Written)
		}
	}
}

// With Debian's irqbalance running and its socket present, the CPUs
// outside the reserved one (the isolated CPU 1) are banned through the
// socket; over ten of its passes (100 s at its default interval) no IRQ
// drift is re-asserted and nothing is written; a restarted irqbalance (new
// pid, the ban forgotten) is sent the ban again; revert restores the ban it
// had before, exactly.
func TestIRQBalanceBannedThroughSocket(t *testing.T) {
	kernellock.Lock(t)
	root := realRoot(t)
	online, err := cpulist.Online(root)
	if err != nil || online.Size() < 2 || !online.Contains(0) || !online.Contains(1) {
		privtest.Missing(t, "needs CPUs 0 and 1 online, have %s (%v)", online, err)
	}
	restoreAllIRQs(t)
	pid, sock := startIRQBalance(t, false)
	reserved := cpuset.New(0)
	outside := online.Difference(reserved)

	knobs, err := Knobs(root, reserved)
	if err != nil {
		t.Fatal(err)
	}
	if len(knobs) == 0 || knobs[0].ID != irqbalance.BanID {
		t.Fatalf("first knob = %v, want irqbalance's ban before every IRQ", knobs[:min(1, len(knobs))])
	}
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	rep, err := e.Apply(apply.Meta{Profile: "irqbalance-test"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	r := result(rep, irqbalance.BanID)
	wantMsg := fmt.Sprintf("banned through irqbalance's socket (pid %d)", pid)
	if r.State != v1alpha1.SettingApplied || !strings.Contains(r.Message, wantMsg) {
		t.Fatalf("%s = %+v, want Applied saying %q", irqbalance.BanID, r, wantMsg)
	}
	if got := banned(t, sock); !outside.IsSubsetOf(got) {
		t.Fatalf("irqbalance bans %s, want %s among them", got, outside)
	}

	watch(t, e, root, reserved, 10)
	if t.Failed() {
		return
	}

	// irqbalance restarts: a new pid, which knows nothing of the ban.
	pid2, sock2 := startIRQBalance(t, true)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/status", pid)); err != nil {
			break
		} else if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); strings.Contains(string(b), "State:\tZ") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("irqbalance %d did not exit", pid)
		}
	}
	before2 := banned(t, sock2)
	if outside.IsSubsetOf(before2) {
		t.Fatalf("the new irqbalance bans %s already; the test cannot show the ban re-sent", before2)
	}
	knobs, err = Knobs(root, reserved)
	if err != nil {
		t.Fatal(err)
	}
	rep, err = e.Apply(apply.Meta{Profile: "irqbalance-test"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	r = result(rep, irqbalance.BanID)
	wantMsg = fmt.Sprintf("banned through irqbalance's socket (pid %d)", pid2)
	if r.State != v1alpha1.SettingApplied || !strings.Contains(r.Message, wantMsg) {
		t.Fatalf("after the restart %s = %+v, want Applied saying %q", irqbalance.BanID, r, wantMsg)
	}
	if got := banned(t, sock2); !outside.IsSubsetOf(got) {
		t.Fatalf("the restarted irqbalance bans %s, want %s among them", got, outside)
	}

	rev, err := e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rev.Results {
		if r.Setting == irqbalance.BanID && r.State != v1alpha1.SettingReverted {
			t.Errorf("revert of %s = %+v, want Reverted", r.Setting, r)
		}
	}
	if got := banned(t, sock2); !got.Equals(before2) {
		t.Errorf("after revert irqbalance bans %q, want %q as before the ban", got.String(), before2.String())
	}
}

// irqbalance spreads IRQs over the CPUs it may use, one CPU each: with
// every online CPU reserved (nothing to ban), each IRQ it moves to one of
// them is its placement, not drift, over ten of its passes.
func TestIRQBalancePlacementIsNotDrift(t *testing.T) {
	kernellock.Lock(t)
	root := realRoot(t)
	online, err := cpulist.Online(root)
	if err != nil || online.Size() < 2 {
		privtest.Missing(t, "needs two online CPUs, have %s (%v)", online, err)
	}
	restoreAllIRQs(t)
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	// The agent steers every IRQ to all reserved CPUs first ...
	knobs, err := Knobs(root, online)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(apply.Meta{Profile: "irqbalance-test"}, knobs); err != nil {
		t.Fatal(err)
	}
	// ... then irqbalance starts and moves them onto single CPUs.
	_, _ = startIRQBalance(t, false)
	knobs, err = Knobs(root, online)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range knobs {
		if k.ID == irqbalance.BanID {
			t.Fatalf("a ban rendered with every CPU reserved: %+v", k)
		}
	}
	if _, err := e.Apply(apply.Meta{Profile: "irqbalance-test"}, knobs); err != nil {
		t.Fatal(err)
	}
	watch(t, e, root, online, 6)
	moved := 0
	for _, k := range knobs {
		if n, ok := Number(k.ID); ok {
			if v, err := root.ReadString(k.Path); err == nil && !cpulist.Equal(v, online.String()) {
				moved++
				t.Logf("IRQ %d: irqbalance placed it on %s", n, v)
			}
		}
	}
	if moved == 0 {
		t.Error("irqbalance moved no IRQ within the reserved CPUs: the test shows nothing")
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
}
