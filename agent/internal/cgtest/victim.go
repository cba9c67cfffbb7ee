package cgtest

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The attribution tests' victim is this test binary re-executed (the
// kernel VMs of hack/vm have no C compiler, and every test binary there is
// static Go): one thread that sleeps 1 ms, then burns CPU for a while, in
// a loop. Only raw system calls (nanosleep, clock_gettime): the loop calls
// no function the Go scheduler can preempt it in, and with no async
// preemption, GOMAXPROCS=1 and no allocation (no GC) the runtime never
// switches it out or hands its P to another thread. A first version slept
// in a raw nanosleep but read the clock with time.Now: sysmon preempted it
// in time.Now's prologue every 10 ms, and the thread hand-offs that
// followed (it was locked to its thread) kept the victim waiting behind its
// own threads: 20-40 % SamePod beside a hog in the emulated VMs, 90 % with
// no hog. What remains is sysmon, waking at most every 10 ms.
const victimEnv = "LATENCYTIER_CGTEST_VICTIM_BURN_NS"

func init() {
	if v, ok := os.LookupEnv(victimEnv); ok {
		burn, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			os.Exit(2)
		}
		victim(burn)
	}
}

func victim(burn int64) {
	ms := syscall.Timespec{Nsec: int64(time.Millisecond)}
	var now syscall.Timespec
	for {
		_, _, _ = syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ms)), 0, 0)
		if burn <= 0 {
			continue
		}
		_, _, _ = syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&now)), 0) // CLOCK_MONOTONIC
		end := now.Sec*1e9 + now.Nsec + burn
		for now.Sec*1e9+now.Nsec < end {
			_, _, _ = syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&now)), 0)
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
