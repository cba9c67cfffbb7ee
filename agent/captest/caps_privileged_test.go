//go:build privileged

package captest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/agent/captest"
	"latencytier.io/latencytier/internal/kernellock"
	"latencytier.io/latencytier/internal/privtest"
)

// The helper child reads what to do from these variables.
const (
	stageEnv  = "LATENCYTIER_CAPTEST_STAGE" // "drop", then "run"
	capsEnv   = "LATENCYTIER_CAPTEST_CAPS"  // the set, as a number
	opEnv     = "LATENCYTIER_CAPTEST_OP"
	resultEnv = "LATENCYTIER_CAPTEST_RESULT" // file for the child's result
	mountEnv  = "LATENCYTIER_CAPTEST_MOUNT"  // directory to mount on
	targetEnv = "LATENCYTIER_CAPTEST_TARGET" // pid of the parent's sleep
)

const manifest = "../../config/agent/daemonset.yaml"

// The host operations the agent needs a capability for, by name; each runs
// in the helper child.
const (
	opMount   = "mount-debugfs"
	opSched   = "sched-fifo"
	opExe     = "target-exe"
	opEnviron = "target-environ"
	opRoot    = "target-root"
	opBPF     = "bpf-raw-tp"
	opSyslog  = "syslog-read-all"
)

var allOps = []string{opMount, opSched, opExe, opEnviron, opRoot, opBPF, opSyslog}

var ops = map[string]func() error{
	opMount:   mountDebugfs,
	opSched:   schedFIFO,
	opExe:     func() error { _, err := os.Readlink(targetProc("exe")); return err },
	opEnviron: func() error { _, err := os.ReadFile(targetProc("environ")); return err },
	opRoot:    func() error { _, err := os.Readlink(targetProc("root")); return err },
	opBPF:     bpfRawTracepoint,
	opSyslog:  syslogReadAll,
}

// mountDebugfs mounts debugfs as the agent does, on a directory of the
// test, in the child's own mount namespace (made by its parent): the mount
// ends with the child.
func mountDebugfs() error {
	dir := os.Getenv(mountEnv)
	if err := unix.Mount("debugfs", dir, "debugfs", 0, ""); err != nil {
		return fmt.Errorf("mount debugfs on %s: %w", dir, err)
	}
	return unix.Unmount(dir, 0)
}

// targetProc is a file under /proc of the parent's sleep: a root process
// holding every capability the test does, more than the child, as
// irqbalance or systemd hold more than the agent. (Not pid 1: where the
// test runs in a sandbox, pid 1 may refuse even a process holding every
// capability.)
func targetProc(name string) string {
	return filepath.Join("/proc", os.Getenv(targetEnv), name)
}

// schedFIFO makes the parent's sleep SCHED_FIFO 1, as the agent does to a
// pod's threads. The parent kills the sleep.
func schedFIFO() error {
	pid, err := strconv.Atoi(os.Getenv(targetEnv))
	if err != nil {
		return err
	}
	attr := &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}
	if err := unix.SchedSetAttr(pid, attr, 0); err != nil {
		return fmt.Errorf("sched_setattr %d SCHED_FIFO 1: %w", pid, err)
	}
	return nil
}

// bpfRawTracepoint loads and attaches a raw tracepoint program on
// sched_switch, the kind the agent's run-queue latency programs are.
func bpfRawTracepoint() error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.RawTracepoint,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer prog.Close()
	l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sched_switch", Program: prog})
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	return l.Close()
}

// syslogReadAll reads the kernel log with syslog(2), as the agent does.
func syslogReadAll() error {
	const readAll = 3 // SYSLOG_ACTION_READ_ALL
	_, err := unix.Klogctl(readAll, make([]byte, 4096))
	if err != nil {
		return fmt.Errorf("syslog READ_ALL: %w", err)
	}
	return nil
}

// result is what the helper child reports: the operation's outcome ("ok"
// or the errno's name) and every thread's capability sets.
type result struct {
	Outcome string
	Detail  string
	Sets    map[string]map[string]captest.Set // field → thread → set
}

// TestCapabilityHelper is not a test: it is the child the tests start (this
// binary, re-executed). Stage "drop" gives itself exactly the set and
// re-executes; stage "run" runs the operation and writes the result.
func TestCapabilityHelper(t *testing.T) {
	switch os.Getenv(stageEnv) {
	case "":
		return
	case "drop":
		n, err := strconv.ParseUint(os.Getenv(capsEnv), 10, 64)
		if err == nil {
			// Replaced, not appended: a duplicate's first value wins.
			env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
				return strings.HasPrefix(kv, stageEnv+"=")
			})
			env = append(env, stageEnv+"=run")
			err = captest.Exec(captest.Set(n), os.Args, env)
		}
		writeResult(result{Outcome: "helper-failed", Detail: fmt.Sprint(err)})
		os.Exit(2)
	case "run":
		writeResult(runOp(os.Getenv(opEnv)))
		os.Exit(0)
	}
}

func runOp(name string) result {
	op, ok := ops[name]
	if !ok {
		return result{Outcome: "helper-failed", Detail: "unknown operation " + name}
	}
	// Without a capability, the rlimit alone must not allow real-time.
	if err := unix.Setrlimit(unix.RLIMIT_RTPRIO, &unix.Rlimit{}); err != nil {
		return result{Outcome: "helper-failed", Detail: err.Error()}
	}
	r := result{Outcome: "ok", Sets: map[string]map[string]captest.Set{}}
	if err := op(); err != nil {
		r.Outcome, r.Detail = errnoName(err), err.Error()
	}
	for _, field := range []string{"CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"} {
		sets, err := captest.ThreadSets(field)
		if err != nil {
			return result{Outcome: "helper-failed", Detail: err.Error()}
		}
		r.Sets[field] = sets
	}
	return r
}

func errnoName(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return unix.ErrnoName(errno)
	}
	return "error"
}

func writeResult(r result) {
	b, _ := json.Marshal(r)
	_ = os.WriteFile(os.Getenv(resultEnv), b, 0o600)
}

// run runs op in a child holding exactly set and returns its outcome,
// failing the test unless every thread of the child held exactly set.
func run(t *testing.T, set captest.Set, op string) result {
	t.Helper()
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	target := startTarget(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCapabilityHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		stageEnv+"=drop",
		capsEnv+"="+strconv.FormatUint(uint64(set), 10),
		opEnv+"="+op,
		resultEnv+"="+filepath.Join(dir, "result.json"),
		mountEnv+"="+mnt,
		targetEnv+"="+strconv.Itoa(target.Process.Pid))
	// Its own mount namespace (Go makes / private in it): no mount the
	// child makes reaches the host.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	b, rerr := os.ReadFile(filepath.Join(dir, "result.json"))
	if rerr != nil {
		t.Fatalf("helper wrote no result (%v): %v\n%s", rerr, err, out)
	}
	var r result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Outcome == "helper-failed" || err != nil {
		t.Fatalf("helper failed: %s (%v)\n%s", r.Detail, err, out)
	}
	checkSets(t, r, set)
	checkNoMount(t, mnt)
	checkTarget(t, target, op == opSched && r.Outcome == "ok")
	return r
}

// checkSets fails unless every thread held set as its effective, permitted
// and bounding sets, and nothing inheritable or ambient.
func checkSets(t *testing.T, r result, set captest.Set) {
	t.Helper()
	want := map[string]captest.Set{"CapEff": set, "CapPrm": set, "CapBnd": set, "CapInh": 0, "CapAmb": 0}
	for field, w := range want {
		if len(r.Sets[field]) == 0 {
			t.Fatalf("helper reported no %s", field)
		}
		for tid, got := range r.Sets[field] {
			if got != w {
				t.Fatalf("helper thread %s: %s %#x (%s), want %#x (%s)", tid, field, uint64(got), got, uint64(w), w)
			}
		}
	}
}

// startTarget starts the process the SCHED_FIFO operation changes.
func startTarget(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// checkTarget checks the target is real-time exactly when the operation
// said ok, puts it back to SCHED_OTHER and ends it: no RT task is left.
func checkTarget(t *testing.T, target *exec.Cmd, wantFIFO bool) {
	t.Helper()
	attr, err := unix.SchedGetAttr(target.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := attr.Policy == unix.SCHED_FIFO; got != wantFIFO {
		t.Errorf("target policy %d, want SCHED_FIFO %v", attr.Policy, wantFIFO)
	}
	if err := unix.SchedSetAttr(target.Process.Pid, &unix.SchedAttr{Policy: unix.SCHED_NORMAL}, 0); err != nil {
		t.Error(err)
	}
	_ = target.Process.Kill()
	_ = target.Wait()
}

// checkNoMount fails if dir is a mount point in the test's (the host's)
// mount namespace.
func checkNoMount(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			t.Fatalf("mount left on the host: %s", line)
		}
	}
}

// agentCaps is the set the agent's DaemonSets add, read from the manifest
// (so the test proves the shipped set, and fails when the two DaemonSets
// disagree). It fails unless they drop ALL.
func agentCaps(t *testing.T) captest.Set {
	t.Helper()
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var sets []captest.Set
	for doc := range strings.SplitSeq(string(b), "\n---\n") {
		var ds appsv1.DaemonSet
		if err := yaml.Unmarshal([]byte(doc), &ds); err != nil {
			t.Fatal(err)
		}
		for _, c := range ds.Spec.Template.Spec.Containers {
			sc := c.SecurityContext
			if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				t.Fatalf("%s/%s: container does not drop ALL capabilities", ds.Name, c.Name)
			}
			var names []string
			for _, c := range sc.Capabilities.Add {
				names = append(names, string(c))
			}
			s, err := captest.Of(names...)
			if err != nil {
				t.Fatalf("%s/%s: %v", ds.Name, c.Name, err)
			}
			sets = append(sets, s)
		}
	}
	if len(sets) == 0 || slices.ContainsFunc(sets, func(s captest.Set) bool { return s != sets[0] }) {
		t.Fatalf("%s: the agent containers add different capability sets: %v", manifest, sets)
	}
	return sets[0]
}

func caps(t *testing.T, names ...string) captest.Set {
	t.Helper()
	s, err := captest.Of(names...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// restrictDmesg sets kernel.dmesg_restrict to v until the test ends.
func restrictDmesg(t *testing.T, v string) {
	t.Helper()
	const path = "/proc/sys/kernel/dmesg_restrict"
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(path, old, 0o644); err != nil {
			t.Errorf("restore %s: %v", path, err)
		}
	})
}

type row struct {
	name string // the capability the row is about, and how
	set  captest.Set
	op   string
	want string // "ok" or an errno name, as observed on 6.18
}

// rows is the finding: each capability found by removing it. want is what
// the kernel (6.18) was seen to do, not what it should do.
func rows(t *testing.T, agent captest.Set) []row {
	c := func(names ...string) captest.Set { return caps(t, names...) }
	admin, bpf, perfmon, syslog := c("SYS_ADMIN"), c("BPF"), c("PERFMON"), c("SYSLOG")
	ptrace := c("SYS_PTRACE")
	var rs []row
	for _, op := range allOps {
		rs = append(rs, row{"agent set", agent, op, "ok"})
	}
	rs = append(rs,
		// Strictly needed: nothing else the agent holds stands in.
		row{"SYS_ADMIN/without", agent &^ admin, opMount, "EPERM"},
		row{"SYS_ADMIN/alone", admin, opMount, "ok"},
		row{"SYS_NICE/without", agent &^ c("SYS_NICE"), opSched, "EPERM"},
		row{"SYS_NICE/alone", c("SYS_NICE"), opSched, "ok"},
		row{"SYS_PTRACE/without", agent &^ ptrace, opExe, "EACCES"},
		row{"SYS_PTRACE/without", agent &^ ptrace, opRoot, "EACCES"},
		row{"SYS_PTRACE/alone", ptrace, opExe, "ok"},
		row{"SYS_PTRACE/alone", ptrace, opEnviron, "ok"},
		row{"SYS_PTRACE/alone", ptrace, opRoot, "ok"},
		// environ, unlike exe and root, also opens with PERFMON (or
		// SYS_ADMIN, which perfmon_capable accepts) instead of SYS_PTRACE.
		row{"SYS_PTRACE/without", agent &^ ptrace, opEnviron, "ok"},
		row{"SYS_PTRACE/without, nor PERFMON, nor SYS_ADMIN", agent &^ ptrace &^ perfmon &^ admin, opEnviron, "EACCES"},
		row{"PERFMON/alone", perfmon, opEnviron, "ok"},
		row{"SYS_ADMIN/alone", admin, opEnviron, "ok"},
		row{"PERFMON/alone", perfmon, opExe, "EACCES"},
		row{"SYS_ADMIN/alone", admin, opExe, "EACCES"},
		// With kernel.dmesg_restrict 1, only SYSLOG: 6.18 does not take
		// SYS_ADMIN instead.
		row{"SYSLOG/without", agent &^ syslog, opSyslog, "EPERM"},
		row{"SYSLOG/alone", syslog, opSyslog, "ok"},
		row{"SYS_ADMIN/alone", admin, opSyslog, "EPERM"},
		// SYS_ADMIN stands in for BPF and PERFMON (bpf_capable,
		// perfmon_capable): removing one alone changes nothing while
		// SYS_ADMIN stays; without SYS_ADMIN both are needed.
		row{"BPF/without", agent &^ bpf, opBPF, "ok"},
		row{"BPF/without, nor SYS_ADMIN", agent &^ bpf &^ admin, opBPF, "EPERM"},
		row{"PERFMON/without", agent &^ perfmon, opBPF, "ok"},
		row{"PERFMON/without, nor SYS_ADMIN", agent &^ perfmon &^ admin, opBPF, "EPERM"},
		row{"BPF+PERFMON/alone", bpf | perfmon, opBPF, "ok"},
		row{"BPF/alone", bpf, opBPF, "EPERM"},
		row{"PERFMON/alone", perfmon, opBPF, "EPERM"},
		row{"SYS_ADMIN/alone", admin, opBPF, "ok"},
	)
	for _, op := range allOps {
		want := "EPERM"
		if op == opExe || op == opEnviron || op == opRoot {
			want = "EACCES" // procfs turns ptrace's EPERM into EACCES
		}
		rs = append(rs, row{"no capabilities", 0, op, want})
	}
	return rs
}

// Each capability the agent adds is found by removing it: every operation
// the agent needs works with the manifest's set, and fails without the
// capability it is kept for (or, for BPF and PERFMON, without it and
// SYS_ADMIN, which the kernel also accepts for them).
func TestAgentCapabilities(t *testing.T) {
	privtest.Root(t)
	kernellock.Lock(t)
	// With dmesg_restrict 0, reading the log needs no capability at all.
	restrictDmesg(t, "1")
	agent := agentCaps(t)
	t.Logf("agent set from %s: %s", manifest, agent)
	var table []string
	for _, r := range rows(t, agent) {
		t.Run(r.name+"/"+r.op, func(t *testing.T) {
			got := run(t, r.set, r.op)
			t.Logf("%s with %s: %s %s", r.op, r.set, got.Outcome, got.Detail)
			table = append(table, fmt.Sprintf("%-16s %-44s %s", r.op, r.set, got.Outcome))
			if got.Outcome != r.want {
				t.Errorf("%s with %s: %s (%s), want %s", r.op, r.set, got.Outcome, got.Detail, r.want)
			}
		})
	}
	t.Logf("observed (dmesg_restrict=1):\n%s", strings.Join(table, "\n"))
}

// With kernel.dmesg_restrict 0 (the kernel's default), syslog(2) READ_ALL
// needs no capability: SYSLOG is needed only where dmesg_restrict is 1.
func TestSyslogUnrestricted(t *testing.T) {
	privtest.Root(t)
	kernellock.Lock(t)
	restrictDmesg(t, "0")
	if got := run(t, 0, opSyslog); got.Outcome != "ok" {
		t.Errorf("%s with no capabilities, dmesg_restrict 0: %s (%s), want ok", opSyslog, got.Outcome, got.Detail)
	}
}
