package fleetsim

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"latencytier.io/latencytier/controllers"
)

// manager is the real latencytier manager: a `latencytier manager`
// subprocess (its CPU and RSS are its own, read from /proc/<pid>) or, with
// no binary, controllers.RunManager in this process (then CPU and RSS are
// not measured: they would be the whole simulator's).
type manager struct {
	cmd  *exec.Cmd
	done chan error
	stop context.CancelFunc
}

// managerArgs leave out --kubeconfig: the manager then loads $KUBECONFIG
// through ctrl.GetConfig, as it loads its in-cluster config in a real
// deployment, with controller-runtime's defaults (no client-side rate
// limit). --kubeconfig goes through clientcmd and keeps client-go's 5 QPS,
// which would measure that limit instead of the manager.
var managerArgs = []string{"manager", "--namespace=" + operatorNamespace,
	"--metrics-bind-address=0", "--health-probe-bind-address=0"}

func startManager(ctx context.Context, binary string, extra []string, kubeconfig, tmp string) (*manager, error) {
	m := &manager{done: make(chan error, 1)}
	args := append(slices.Clone(managerArgs), extra...)
	if binary == "" {
		// In process the environment is the simulator's own.
		if err := os.Setenv("KUBECONFIG", kubeconfig); err != nil {
			return nil, err
		}
		ctx, m.stop = context.WithCancel(ctx)
		go func() { m.done <- controllers.RunManager(ctx, args[1:]) }()
		return m, nil
	}
	logf, err := os.Create(filepath.Join(tmp, "manager.log"))
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(binary, args...)
	m.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if err := m.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	go func() {
		err := m.cmd.Wait()
		_ = logf.Close()
		m.done <- err
	}()
	return m, nil
}

// Stop ends the manager and waits for it.
func (m *manager) Stop() {
	if m.cmd != nil {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
	} else {
		m.stop()
	}
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		if m.cmd != nil {
			_ = m.cmd.Process.Kill()
		}
	}
}

// exited reports whether the manager stopped on its own, and why.
func (m *manager) exited() error {
	select {
	case err := <-m.done:
		m.done <- err
		return fmt.Errorf("manager exited: %v", err)
	default:
		return nil
	}
}

// usage is a process's CPU time and resident set.
type usage struct {
	cpu time.Duration
	rss uint64 // bytes
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

// sample reads the subprocess's CPU time (utime+stime) and VmRSS; ok is false
// for an in-process manager.
func (m *manager) sample() (u usage, ok bool) {
	if m.cmd == nil || m.cmd.Process == nil {
		return u, false
	}
	pid := m.cmd.Process.Pid
	var err error
	if u.cpu, err = procCPU(pid); err != nil {
		return u, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, "VmRSS:"); found {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			u.rss = kb * 1024
		}
	}
	return u, true
}

// procCPU is a process's user+system CPU time (/proc/<pid>/stat fields 14
// and 15).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// cpuShares are the CPU times of everything a fleet runs on the machine.
type cpuShares struct{ apiserver, etcd, sim, manager time.Duration }

// childPid is the pid of this process's child named comm (the envtest
// binaries), 0 when there is none.
func childPid(comm string) int {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) > 1 && s[open+1:end] == comm && f[1] == strconv.Itoa(self) {
			return pid
		}
	}
	return 0
}

// shares samples the CPU times of the API server, etcd, this simulator
// (the agents) and the manager.
func (m *manager) shares() cpuShares {
	var c cpuShares
	if pid := childPid("kube-apiserver"); pid > 0 {
		c.apiserver, _ = procCPU(pid)
	}
	if pid := childPid("etcd"); pid > 0 {
		c.etcd, _ = procCPU(pid)
	}
	c.sim, _ = procCPU(os.Getpid())
	if u, ok := m.sample(); ok {
		c.manager = u.cpu
	}
	return c
}
