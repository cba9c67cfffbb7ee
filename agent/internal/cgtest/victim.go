package cgtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The attribution tests' victim is this test binary re-executed (the
// kernel VMs of hack/vm have no C compiler, and every test binary there is
// static Go): one thread that sleeps 1 ms, then burns CPU for a while, in
// a loop, alone on its CPU. Only raw system calls (nanosleep,
// clock_gettime): the loop calls no function the Go scheduler can preempt
// it in, and with no async preemption, GOMAXPROCS=1 and no allocation (no
// GC) the runtime never switches it out or hands its P to another thread.
// The runtime's one other thread, sysmon (waking up to every 10 ms), runs
// on the other CPUs, in a cgroup below the victim's (hideRuntime), so the
// pod's wait is the victim thread's alone and it never waits behind sysmon.
//
// Earlier versions, in the emulated VMs: time.Now in the burn loop (sysmon
// preempted it there every 10 ms, and the thread hand-offs that followed
// kept it waiting behind its own threads: 41 % SamePod beside a service
// hog, 90 % with no hog); raw syscalls with sysmon beside it (26 %
// SamePod beside a hog); sysmon on the other CPUs but in the victim's
// cgroup (its waits there are the pod's: 30-40 % SystemService / on the
// busy development machine); sysmon SCHED_IDLE beside it (30-60 % SamePod
// in the VMs: sysmon's waits behind the victim); sysmon in the cgroup
// below but on the victim's CPU (1-7 % charged to that cgroup).
const victimEnv = "LATENCYTIER_CGTEST_VICTIM" // "<burn ns>,<cpu>"

func init() {
	if v, ok := os.LookupEnv(victimEnv); ok {
		b, c, _ := strings.Cut(v, ",")
		burn, err1 := strconv.ParseInt(b, 10, 64)
		cpu, err2 := strconv.Atoi(c)
		if err1 != nil || err2 != nil {
			os.Exit(2)
		}
		victim(burn, cpu)
	}
}

func victim(burn int64, cpu int) {
	runtime.LockOSThread()
	if cpu >= 0 {
		pinAlone(cpu)
	}
	ms := syscall.Timespec{Nsec: int64(time.Millisecond)}
	var now syscall.Timespec
	for {
		_, _, _ = syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ms)), 0, 0)
		if burn <= 0 {
			continue
		}
		_, _, _ = syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&now)), 0)
		end := now.Sec*1e9 + now.Nsec + burn
		for now.Sec*1e9+now.Nsec < end {
			_, _, _ = syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&now)), 0)
		}
	}
}

// pinAlone pins the calling thread to cpu and every other thread of the
// process (sysmon, which hideRuntime moves out of the measured cgroup) to
// the other CPUs it may use, if any: the victim is alone on its CPU.
func pinAlone(cpu int) {
	var others, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &others); err != nil {
		os.Exit(3)
	}
	others.Clear(cpu)
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		os.Exit(3)
	}
	if others.Count() == 0 {
		return
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		os.Exit(3)
	}
	for _, e := range tasks {
		if tid, err := strconv.Atoi(e.Name()); err == nil && tid != unix.Gettid() {
			_ = unix.SchedSetaffinity(tid, &others)
		}
	}
}

// StartVictim starts the victim pinned to cpu (cpu < 0: not pinned),
// burning burn of CPU per wake-up, moves it into cgroup dir of a pod p
// built (its runtime thread into a cgroup below, see hideRuntime) and
// returns its pid; it is killed in t.Cleanup.
func (p Pod) StartVictim(t testing.TB, dir string, cpu int, burn time.Duration) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rt := filepath.Join(dir, "go-runtime")
	Mkdir(t, rt)
	if p.Version == 2 {
		Set(t, filepath.Join(rt, "cgroup.type"), "threaded")
		Set(t, filepath.Join(dir, "cgroup.subtree_control"), "+cpu")
		Set(t, filepath.Join(rt, "cpu.weight"), "1")
	} else {
		Set(t, filepath.Join(rt, "cpu.shares"), "2")
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), victimEnv+"="+strconv.FormatInt(int64(burn), 10)+","+strconv.Itoa(cpu),
		"GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1")
	pid := StartCmd(t, dir, cmd)
	p.hideRuntime(t, rt, pid)
	return pid
}

// hideRuntime moves every thread of pid but the first (the Go runtime's
// sysmon) into cgroup rt below the victim's: only tasks directly in a pod
// or container cgroup are measured, so the pod's wait is the victim
// thread's alone, as a one-threaded C victim's would be. In the emulated
// VMs sysmon, SCHED_IDLE beside the victim, waited behind it often enough
// to make 30-60 % of the pod's wait SamePod. cgroup v1 places threads
// (tasks), v2 only in a threaded cgroup (cgroup.threads). Its lowest
// weight keeps it from delaying the victim where it cannot leave the
// victim's CPU (a one-CPU machine).
func (p Pod) hideRuntime(t testing.TB, rt string, pid int) {
	t.Helper()
	file := "tasks"
	if p.Version == 2 {
		file = "cgroup.threads"
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) > 1 {
			for _, e := range tasks {
				if e.Name() != strconv.Itoa(pid) {
					Set(t, filepath.Join(rt, file), e.Name())
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the victim (pid %d) started no runtime thread in 5 s", pid)
		}
	}
}

// SpinOn is Spin pinned to cpu.
func SpinOn(t testing.TB, dir string, cpu int) int {
	t.Helper()
	return StartIn(t, dir, "taskset", "-c", strconv.Itoa(cpu), "sh", "-c", "while :; do :; done")
}
