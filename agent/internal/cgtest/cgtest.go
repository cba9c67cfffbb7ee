// Package cgtest makes throwaway cgroups in the real cgroup hierarchy (v1,
// or v2 for the cpu controller: v2.go) for tests: kubelet-shaped pod trees
// under a unique kubepods name, processes moved into them (victim.go: the
// attribution tests' victim), writes that fail the test, and nr_throttled
// counters.
// Every cgroup and process it makes is removed in t.Cleanup, so tests that
// use it change no shared kernel state and need no kernellock.
package cgtest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/internal/privtest"
)

// RandHex is n random bytes in hex.
func RandHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Set writes val to an existing kernel or cgroup file the way the agent
// does (host.Root.WriteString: no create), failing the test on error.
// testroot.Read reads one back.
func Set(t testing.TB, path, val string) {
	t.Helper()
	if err := host.New("/").WriteString(path, val); err != nil {
		t.Fatalf("writing %q to %s: %v", val, path, err)
	}
}

// V1Controller is the real v1 hierarchy of controller; it fails the test
// (privtest) when not root or when the controller is not mounted as cgroup
// v1.
func V1Controller(t testing.TB, controller string) string {
	t.Helper()
	privtest.Root(t)
	base, version, err := podcgroup.ControllerDir(host.New("/"), controller)
	if err != nil || version != 1 {
		privtest.Missing(t, "no cgroup v1 %s controller here (version %d, %v)", controller, version, err)
	}
	return base
}

// Mkdir creates the cgroup dir and removes it in t.Cleanup (cleanups run
// last-in first-out, so nested dirs made in order go deepest first).
func Mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeCgroup(dir); err != nil {
			t.Errorf("removing test cgroup: %v", err)
		}
	})
}

// removeCgroup removes a test cgroup once the processes left in it are
// gone: a killed `sh -c 'while :; do sleep 0.01; done'` leaves its last
// sleep behind for up to 10 ms, and rmdir of a populated cgroup is EBUSY
// (it failed TestPodRunDelayCountsOnlyThePodsTasks once in CI-like runs).
// Whatever is still listed in cgroup.procs is killed; the removal is tried
// for up to 5 s.
func removeCgroup(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		if b, rerr := os.ReadFile(filepath.Join(dir, "cgroup.procs")); rerr == nil {
			for _, f := range strings.Fields(string(b)) {
				if pid, perr := strconv.Atoi(f); perr == nil && pid > 1 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pod is a kubelet-shaped burstable pod with one container in a real
// cgroup hierarchy (v1: one controller's; v2: the unified one).
type Pod struct {
	Kubepods string // the unique kubepods name (podcgroup.WithKubepods)
	UID      string
	Dir      string // the pod's cgroup
	CtrDir   string // its container's cgroup
	// KubepodsDir is the top of the tree (<kubepods> or <kubepods>.slice).
	KubepodsDir string
	// Version is the hierarchy's cgroup version, 1 or 2.
	Version int

	base, driver string
	init         func(dir string)
	cid          string
}

// V1Pod builds a pod under a unique kubepods name (prefix + random hex) in
// the real v1 hierarchy of controller, for the cgroupfs
// (<kubepods>/burstable/pod<uid>/<cid>) or the systemd driver
// (<kubepods>.slice/<kubepods>-burstable.slice/<kubepods>-burstable-pod<uid_>.slice/cri-containerd-<cid>.scope).
// init, if not nil, runs on each cgroup right after it is made (a v1 cpuset
// child needs cpus and mems before it can have children or tasks). The
// tree is removed in t.Cleanup.
func V1Pod(t testing.TB, controller, driver, prefix string, init func(dir string)) Pod {
	t.Helper()
	p := Pod{Kubepods: prefix + RandHex(t, 4), Version: 1, base: V1Controller(t, controller), driver: driver, init: init}
	p.build(t)
	return p
}

// Sibling is another burstable pod (a new uid and container) in p's
// kubepods tree, removed in t.Cleanup.
func (p Pod) Sibling(t testing.TB) Pod {
	t.Helper()
	s := Pod{Kubepods: p.Kubepods, Version: p.Version, base: p.base, driver: p.driver, init: p.init}
	s.build(t)
	return s
}

// Mirror builds p's cgroups (the same kubepods name, uid and container id)
// in the real v1 hierarchy of another controller, as kubelet makes a pod's
// cgroups in every v1 controller; init runs on each as in V1Pod. Processes
// are not moved: StartIn into p, then Move into the mirror. The tree is
// removed in t.Cleanup.
func (p Pod) Mirror(t testing.TB, controller string, init func(dir string)) Pod {
	t.Helper()
	if p.Version != 1 {
		t.Fatalf("Mirror of a cgroup v%d pod: v2 has one tree for every controller", p.Version)
	}
	m := Pod{Kubepods: p.Kubepods, UID: p.UID, Version: 1, base: V1Controller(t, controller), driver: p.driver, init: init, cid: p.cid}
	m.build(t)
	return m
}

// Move moves process pid (all its threads) into cgroup dir.
func Move(t testing.TB, dir string, pid int) {
	t.Helper()
	Set(t, filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid))
}

// build makes p's cgroups (a new uid and container id unless set) below
// the levels that exist already, each with a cleanup.
func (p *Pod) build(t testing.TB) {
	t.Helper()
	if p.UID == "" {
		p.UID = RandHex(t, 4) + "-0000-4000-8000-" + RandHex(t, 6)
	}
	if p.cid == "" {
		p.cid = RandHex(t, 32)
	}
	cid := p.cid
	rels := []string{p.Kubepods, "burstable", "pod" + p.UID, cid}
	if p.driver == podcgroup.DriverSystemd {
		rels = []string{p.Kubepods + ".slice", p.Kubepods + "-burstable.slice",
			p.Kubepods + "-burstable-pod" + strings.ReplaceAll(p.UID, "-", "_") + ".slice", "cri-containerd-" + cid + ".scope"}
	}
	dir := p.base
	for i, r := range rels {
		dir = filepath.Join(dir, r)
		if _, err := os.Stat(dir); err == nil && i < 2 {
			continue // a sibling's kubepods and QoS levels
		}
		Mkdir(t, dir)
		if p.init != nil {
			p.init(dir)
		}
		if p.Version == 2 && i < len(rels)-1 {
			// kubelet enables cpu down to the container, so a task's cpu
			// cgroup is its container's (no processes live in these yet)
			Set(t, filepath.Join(dir, "cgroup.subtree_control"), "+cpu")
		}
	}
	p.KubepodsDir = filepath.Join(p.base, rels[0])
	p.CtrDir, p.Dir = dir, filepath.Dir(dir)
}

// StartIn starts name with args, moves it into cgroup dir and returns its
// pid; it is killed in t.Cleanup, registered after the cgroup's, so it is
// gone before the cgroup is removed.
func StartIn(t testing.TB, dir, name string, args ...string) int {
	t.Helper()
	return StartCmd(t, dir, exec.Command(name, args...))
}

// StartCmd is StartIn for a prepared command (its environment set).
func StartCmd(t testing.TB, dir string, cmd *exec.Cmd) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	Set(t, filepath.Join(dir, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid))
	return cmd.Process.Pid
}

// Spin starts a busy process (a shell loop of builtins: one thread, no
// forks) in cgroup dir; see StartIn.
func Spin(t testing.TB, dir string) int {
	t.Helper()
	return StartIn(t, dir, "sh", "-c", "while :; do :; done")
}

// NrThrottled is nr_throttled from cgroup dir's cpu.stat (v1 and v2 name
// it alike).
func NrThrottled(t testing.TB, dir string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "nr_throttled "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("%s/cpu.stat: %v", dir, err)
			}
			return n
		}
	}
	t.Fatalf("%s/cpu.stat has no nr_throttled", dir)
	return 0
}

// ThrottledGrowth is how much nr_throttled of dir grows over at least min,
// waiting on past min until it grows at all (at most 10 s: on a loaded
// machine a spinner may not even get its quota's worth of CPU in a period).
// Polling instead of a fixed sleep ends as soon as the kernel has throttled.
func ThrottledGrowth(t testing.TB, dir string, min time.Duration) int64 {
	t.Helper()
	before := NrThrottled(t, dir)
	time.Sleep(min)
	for deadline := time.Now().Add(10 * time.Second); NrThrottled(t, dir) == before && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	return NrThrottled(t, dir) - before
}
