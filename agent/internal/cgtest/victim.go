package cgtest

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The attribution tests' victim is this test binary re-executed (the
// kernel VMs of hack/vm have no C compiler, and every test binary there is
// static Go): one thread that sleeps 1 ms, then burns CPU for a while, in
// a loop. It sleeps with a raw nanosleep, so the Go runtime never sees a
// blocking syscall and never hands its P to a new thread; with GOMAXPROCS=1,
// no allocation (no GC) and no async preemption, the only other thread
// that wakes is sysmon, at most every 10 ms, in the victim's cgroup too.
const victimEnv = "LATENCYTIER_CGTEST_VICTIM_BURN_NS"

func init() {
	if v, ok := os.LookupEnv(victimEnv); ok {
		burn, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			os.Exit(2)
		}
		victim(time.Duration(burn))
	}
}

func victim(burn time.Duration) {
	runtime.LockOSThread()
	ms := syscall.Timespec{Nsec: int64(time.Millisecond)}
	for {
		_, _, _ = syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ms)), 0, 0)
		for end := time.Now().Add(burn); time.Now().Before(end); {
		}
	}
}

// StartVictim starts the victim pinned to cpu (taskset, so every thread it
// has is pinned; cpu < 0: not pinned), burning burn of CPU per wake-up,
// moves it into cgroup dir and returns its pid; it is killed in t.Cleanup.
func StartVictim(t testing.TB, dir string, cpu int, burn time.Duration) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	if cpu >= 0 {
		cmd = exec.Command("taskset", "-c", strconv.Itoa(cpu), exe)
	}
	cmd.Env = append(os.Environ(), victimEnv+"="+strconv.FormatInt(int64(burn), 10),
		"GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1")
	return StartCmd(t, dir, cmd)
}

// SpinOn is Spin pinned to cpu.
func SpinOn(t testing.TB, dir string, cpu int) int {
	t.Helper()
	return StartIn(t, dir, "taskset", "-c", strconv.Itoa(cpu), "sh", "-c", "while :; do :; done")
}
