package irqbalance_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/irqbalance"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// fakeRoot is a host root whose /proc is the real one and whose
// /usr/sbin/irqbalance is a copy of sleep, so a process started from it is
// "the host's irqbalance" to agent/facts; its control socket is a fake
// under the root's /run/irqbalance.
type fakeRoot struct {
	t    *testing.T
	root *host.Root
	bin  string
}

func newFakeRoot(t *testing.T) *fakeRoot {
	dir := t.TempDir()
	for _, d := range []string{"usr/sbin", "run/irqbalance", "sys/devices/system/cpu", "var/lib"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/proc", filepath.Join(dir, "proc")); err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(sleep)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	bin := filepath.Join(dir, "usr/sbin/irqbalance")
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	out.Close()
	return &fakeRoot{t: t, root: host.New(dir), bin: bin}
}

// start runs a process named irqbalance and serves its fake socket.
func (f *fakeRoot) start(banned, envBan cpuset.CPUSet) (*exec.Cmd, *irqbalance.Fake) {
	cmd := exec.Command(f.bin, "600")
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sock := f.root.Path("run", "irqbalance", "irqbalance"+strconv.Itoa(cmd.Process.Pid)+".sock")
	return cmd, irqbalance.ServeFake(f.t, sock, banned, envBan)
}

func banResult(rep apply.Report) v1alpha1.SettingResult {
	for _, r := range append(rep.Results, rep.Restored...) {
		if r.Setting == irqbalance.BanID {
			return r
		}
	}
	return v1alpha1.SettingResult{}
}

func apply1(t *testing.T, e *apply.Engine, cpus cpuset.CPUSet) apply.Report {
	t.Helper()
	r := irqbalance.Find(e.Root, cpus)
	if r.Ban == nil {
		t.Fatalf("Find(%s) rendered no ban (pid %d)", cpus, r.PID)
	}
	rep, err := e.Apply(apply.Meta{Profile: "p"}, []knob.Knob{*r.Ban})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// Through the engine and its journal: an administrator's ban set through
// the socket stays banned beside ours and is what revert puts back; a
// restarted irqbalance (new pid, no ban) is sent the ban again, as drift,
// and revert then lifts the ban with NULL, as that process had none.
func TestBanJournaledAndRestoredExactly(t *testing.T) {
	irqbalance.ShortAwait(t)
	f := newFakeRoot(t)
	e := &apply.Engine{Root: f.root, Log: logr.Discard()}

	cmd, fake := f.start(cpuset.New(5), cpuset.New())
	rep := apply1(t, e, cpuset.New(2, 3))
	r := banResult(rep)
	want := "banned through irqbalance's socket (pid " + strconv.Itoa(cmd.Process.Pid) + "): CPUs 2-3,5"
	if r.State != v1alpha1.SettingApplied || r.Desired != "2-3,5" || r.Message != want {
		t.Fatalf("ban = %+v, want Applied 2-3,5 saying %q", r, want)
	}
	if rep = apply1(t, e, cpuset.New(2, 3)); rep.Written != 0 || len(rep.Drifts) != 0 {
		t.Fatalf("second pass wrote %d, drifts %v; want nothing", rep.Written, rep.Drifts)
	}
	rev, err := e.Revert()
	if err != nil || banResult(rev).State != v1alpha1.SettingReverted {
		t.Fatalf("revert = %+v, %v", rev.Results, err)
	}
	if got := strings.Join(fake.Commands(), "|"); got != "settings cpus 2-3,5|settings cpus 5" {
		t.Errorf("irqbalance was sent %q, want the ban then the administrator's 5 back", got)
	}

	// Restart: the ban is sent to the new pid, its original is what that
	// process banned (nothing through the socket), and revert says NULL.
	apply1(t, e, cpuset.New(2, 3))
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	cmd2, fake2 := f.start(cpuset.New(), cpuset.New())
	rep = apply1(t, e, cpuset.New(2, 3))
	if r := banResult(rep); r.State != v1alpha1.SettingApplied || !strings.Contains(r.Message, "(pid "+strconv.Itoa(cmd2.Process.Pid)+")") {
		t.Fatalf("after the restart ban = %+v, want Applied naming pid %d", r, cmd2.Process.Pid)
	}
	if len(rep.Drifts) != 1 || rep.Drifts[0].ID != irqbalance.BanID {
		t.Errorf("drifts = %+v, want the ban's", rep.Drifts)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(fake2.Commands(), "|"); got != "settings cpus 2-3|settings cpus NULL" {
		t.Errorf("the restarted irqbalance was sent %q, want the ban then NULL", got)
	}
}

// The window's finding reads what irqbalance bans through its socket (the
// agent's ban included); one without a socket keeps its environment's.
func TestWithSocketBans(t *testing.T) {
	root := host.New(t.TempDir())
	if err := os.MkdirAll(root.Path("run", "irqbalance"), 0o755); err != nil {
		t.Fatal(err)
	}
	irqbalance.ServeFake(t, root.Path("run", "irqbalance", "irqbalance42.sock"), cpuset.New(2, 3), cpuset.New())
	got := irqbalance.WithSocketBans(root, []facts.IRQBalance{{PID: 42, Banned: cpuset.New()}, {PID: 43, Banned: cpuset.New(7)}})
	if got[0].Banned.String() != "2-3" || got[1].Banned.String() != "7" {
		t.Errorf("bans = %s, %s; want 2-3 from the socket, 7 from the environment", got[0].Banned, got[1].Banned)
	}
}
