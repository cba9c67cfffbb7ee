package irqbalance_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/irqbalance"
	"latencytier.io/latencytier/agent/systemd"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// unitSim is irqbalance.service as systemd runs it: its Environment=
// (unit plus the runtime drop-in, read from the root at each restart) is
// the environment of the process it starts, a real one from the root's
// irqbalance binary, without a control socket.
type unitSim struct {
	f       *fakeRoot
	mu      sync.Mutex
	unitEnv []string // the unit's own Environment=
	fileEnv []string // its EnvironmentFile='s, which win over Environment=
	cmd     *exec.Cmd
	envNow  []string // Environment= with the drop-in, as systemd reports it
	dropIns []string // DropInPaths
	starts  int
}

func newUnitSim(t *testing.T, f *fakeRoot, unitEnv, fileEnv []string) *unitSim {
	u := &unitSim{f: f, unitEnv: unitEnv, fileEnv: fileEnv}
	u.start()
	irqbalance.UseUnits(t, &irqbalance.FakeUnits{Booted: true,
		Service: func() (systemd.Service, error) {
			u.mu.Lock()
			defer u.mu.Unlock()
			return systemd.Service{LoadState: "loaded", ActiveState: "active", MainPID: u.cmd.Process.Pid, Environment: u.envNow, DropInPaths: u.dropIns}, nil
		},
		Restart: func() (int, error) {
			u.mu.Lock()
			defer u.mu.Unlock()
			_ = u.cmd.Process.Kill()
			_ = u.cmd.Wait()
			u.start()
			return u.cmd.Process.Pid, nil
		}})
	t.Cleanup(func() { _ = u.cmd.Process.Kill(); _ = u.cmd.Wait() })
	return u
}

// start runs the service's process with the environment systemd gives it.
func (u *unitSim) start() {
	env := append([]string(nil), u.unitEnv...)
	var unset []string
	u.dropIns = nil
	if b, err := os.ReadFile(irqbalance.DropInFile(u.f.root)); err == nil {
		u.dropIns = []string{"/run/systemd/system/irqbalance.service.d/50-latencytier.conf"}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Environment="); ok {
				env = append(env, v)
			}
			if v, ok := strings.CutPrefix(l, "UnsetEnvironment="); ok {
				unset = append(unset, v)
			}
		}
	}
	u.envNow = env
	final := append(append([]string(nil), env...), u.fileEnv...)
	final = slicesDeleteKeys(final, unset)
	u.cmd = exec.Command(u.f.bin, "600")
	u.cmd.Env = final
	if err := u.cmd.Start(); err != nil {
		u.f.t.Fatal(err)
	}
	u.starts++
}

func slicesDeleteKeys(env, keys []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, u := range keys {
			drop = drop || u == k
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

func (u *unitSim) environ(t *testing.T) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(u.cmd.Process.Pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "\x00", " ")
}

func (u *unitSim) restarts() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.starts - 1
}

// Through the engine and its journal: without a socket, the ban is a
// runtime drop-in on top of the environment's ban; irqbalance is restarted
// with it once; a second pass writes nothing; a removed drop-in is drift,
// written again; revert removes it and restarts irqbalance with its own
// environment again.
func TestDropInBanJournaledAndReverted(t *testing.T) {
	f := newFakeRoot(t)
	u := newUnitSim(t, f, []string{"IRQBALANCE_BANNED_CPULIST=0"}, nil)
	e := &apply.Engine{Root: f.root, Log: logr.Discard()}

	rep := apply1(t, e, cpuset.New(2, 3))
	r := banResult(rep)
	if r.State != v1alpha1.SettingApplied || r.Desired != "0,2-3 (was 0)" || !strings.Contains(r.Message, "runtime drop-in") {
		t.Fatalf("ban = %+v, want Applied \"0,2-3 (was 0)\" through the drop-in", r)
	}
	if env := u.environ(t); !strings.Contains(env, "IRQBALANCE_BANNED_CPULIST=0,2-3") {
		t.Fatalf("restarted irqbalance's environment = %q, want the ban 0,2-3", env)
	}
	b, err := os.ReadFile(irqbalance.DropInFile(f.root))
	if err != nil || !strings.Contains(string(b), "[Service]\nEnvironment=IRQBALANCE_BANNED_CPULIST=0,2-3\n") || strings.Contains(string(b), "Unset") {
		t.Fatalf("drop-in = %q, %v", b, err)
	}
	if rep = apply1(t, e, cpuset.New(2, 3)); rep.Written != 0 || len(rep.Drifts) != 0 || u.restarts() != 1 {
		t.Fatalf("second pass wrote %d, drifts %v, restarts %d; want nothing more", rep.Written, rep.Drifts, u.restarts())
	}

	if err := os.Remove(irqbalance.DropInFile(f.root)); err != nil {
		t.Fatal(err)
	}
	// systemd still has it loaded and irqbalance's environment holds the
	// ban, so what it banned before is known only as that ban: the drop-in
	// comes back once, over it; revert below still removes it exactly.
	rep = apply1(t, e, cpuset.New(2, 3))
	if r := banResult(rep); rep.Written != 1 || r.State != v1alpha1.SettingApplied || r.Desired != "0,2-3 (was 0,2-3)" || u.restarts() != 2 {
		t.Fatalf("after removal: wrote %d, ban %+v, restarts %d; want it written again once", rep.Written, r, u.restarts())
	}
	if rep = apply1(t, e, cpuset.New(2, 3)); rep.Written != 0 || u.restarts() != 2 {
		t.Fatalf("the pass after wrote %d, restarts %d; want nothing", rep.Written, u.restarts())
	}

	rev, err := e.Revert()
	if err != nil || banResult(rev).State != v1alpha1.SettingReverted {
		t.Fatalf("revert = %+v, %v", rev.Results, err)
	}
	if _, err := os.Stat(irqbalance.DropInFile(f.root)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("drop-in after revert: %v, want it gone", err)
	}
	if env := u.environ(t); !strings.Contains(env, "IRQBALANCE_BANNED_CPULIST=0 ") && !strings.HasSuffix(env, "IRQBALANCE_BANNED_CPULIST=0") {
		t.Fatalf("irqbalance's environment after revert = %q, want its own ban 0", env)
	}
	if u.restarts() != 3 {
		t.Errorf("restarts = %d, want 3 (apply, drift, revert)", u.restarts())
	}
}

// An environment with the older mask variable, which irqbalance reads
// first: the drop-in unsets it, and its CPUs stay banned in the cpulist.
func TestDropInUnsetsTheMask(t *testing.T) {
	f := newFakeRoot(t)
	u := newUnitSim(t, f, []string{"IRQBALANCE_BANNED_CPUS=2"}, nil)
	e := &apply.Engine{Root: f.root, Log: logr.Discard()}
	if r := banResult(apply1(t, e, cpuset.New(4))); r.State != v1alpha1.SettingApplied || r.Desired != "1,4 (was 1); unsets IRQBALANCE_BANNED_CPUS" {
		b, _ := os.ReadFile(irqbalance.DropInFile(f.root))
		t.Fatalf("ban = %+v\nenv %q\nfile %s", r, u.environ(t), b)
	}
	if env := u.environ(t); strings.Contains(env, "IRQBALANCE_BANNED_CPUS=") || !strings.Contains(env, "IRQBALANCE_BANNED_CPULIST=1,4") {
		t.Fatalf("environment = %q, want the mask gone and the cpulist 1,4", env)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if env := u.environ(t); !strings.Contains(env, "IRQBALANCE_BANNED_CPUS=2") {
		t.Fatalf("environment after revert = %q, want the mask back", env)
	}
}

// The cases where the drop-in is not the way, each with its reason, and
// the socket knob's Unsupported message naming it and the remedy.
func TestDropInRefused(t *testing.T) {
	for _, c := range []struct {
		name    string
		booted  bool
		svc     func(pid int) (systemd.Service, error)
		fileEnv []string
		want    string
	}{
		{name: "no systemd", want: "the host's init is not systemd"},
		{name: "no unit", booted: true, want: "systemd has no irqbalance.service loaded",
			svc: func(int) (systemd.Service, error) { return systemd.Service{}, fs.ErrNotExist }},
		{name: "other main pid", booted: true, want: "main process is pid 1, not irqbalance's",
			svc: func(int) (systemd.Service, error) { return systemd.Service{LoadState: "loaded", MainPID: 1}, nil }},
		{name: "environment file", booted: true, fileEnv: []string{"IRQBALANCE_BANNED_CPULIST=0"}, want: "comes from an EnvironmentFile=",
			svc: func(pid int) (systemd.Service, error) { return systemd.Service{LoadState: "loaded", MainPID: pid}, nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeRoot(t)
			cmd := exec.Command(f.bin, "600")
			cmd.Env = c.fileEnv
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			irqbalance.UseUnits(t, &irqbalance.FakeUnits{Booted: c.booted,
				Service: func() (systemd.Service, error) { return c.svc(cmd.Process.Pid) },
				Restart: func() (int, error) { t.Fatal("restarted irqbalance"); return 0, nil }})
			e := &apply.Engine{Root: f.root, Log: logr.Discard()}
			r := banResult(apply1(t, e, cpuset.New(2)))
			if r.State != v1alpha1.SettingUnsupported || !strings.Contains(r.Message, c.want) || !strings.Contains(r.Message, "Ban the CPUs with IRQBALANCE_BANNED_CPULIST") {
				t.Fatalf("ban = %+v, want Unsupported saying %q and the remedy", r, c.want)
			}
			if _, err := os.Stat(irqbalance.DropInFile(f.root)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a drop-in was written: %v", err)
			}
		})
	}
}

// With its socket, irqbalance is banned through it, not the drop-in.
func TestSocketPreferred(t *testing.T) {
	f := newFakeRoot(t)
	cmd, _ := f.start(cpuset.New(), cpuset.New())
	irqbalance.UseUnits(t, &irqbalance.FakeUnits{Booted: true,
		Service: func() (systemd.Service, error) {
			return systemd.Service{LoadState: "loaded", MainPID: cmd.Process.Pid}, nil
		},
		Restart: func() (int, error) { t.Fatal("restarted irqbalance"); return 0, nil }})
	if r := irqbalance.Find(f.root, cpuset.New(2)); r.Ban == nil || r.Ban.Path != "irqbalance:banned" {
		t.Fatalf("Find = %+v, want the socket's knob", r.Ban)
	}
}

// A file at the drop-in's path the agent did not write is never
// overwritten: the setting fails naming it.
func TestForeignDropInNotOverwritten(t *testing.T) {
	f := newFakeRoot(t)
	newUnitSim(t, f, nil, nil)
	file := irqbalance.DropInFile(f.root)
	foreign := "[Service]\nEnvironment=IRQBALANCE_BANNED_CPULIST=7\n"
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(foreign), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &apply.Engine{Root: f.root, Log: logr.Discard()}
	r := banResult(apply1(t, e, cpuset.New(2)))
	if r.State == v1alpha1.SettingApplied || !strings.Contains(r.Message, "not written by the latencytier agent") {
		t.Fatalf("ban = %+v, want a failure naming the foreign drop-in", r)
	}
	if b, _ := os.ReadFile(file); string(b) != foreign {
		t.Fatalf("drop-in = %q, want the foreign one untouched", b)
	}
}
