// Package captest proves, on the real kernel, why the agent's container keeps
// each capability it adds (config/agent/daemonset.yaml): its privileged test
// runs each host operation the agent needs in a process holding an exact
// capability set, and finds each capability by removing it.
//
// This file owns the capability sets and the one way to give a process
// exactly one: Exec drops the bounding set and the calling thread's sets and
// re-executes the program, so every thread of the new image holds the set.
package captest

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Set is a capability set, bit n for capability n (as in /proc status).
type Set uint64

// names are the capabilities the tests name, as Kubernetes spells them.
var names = map[string]int{
	"SYS_ADMIN":  unix.CAP_SYS_ADMIN,
	"SYS_NICE":   unix.CAP_SYS_NICE,
	"SYS_PTRACE": unix.CAP_SYS_PTRACE,
	"BPF":        unix.CAP_BPF,
	"PERFMON":    unix.CAP_PERFMON,
	"SYSLOG":     unix.CAP_SYSLOG,
}

// Of returns the set of the named capabilities.
func Of(caps ...string) (Set, error) {
	var s Set
	for _, c := range caps {
		n, ok := names[c]
		if !ok {
			return 0, fmt.Errorf("unknown capability %q", c)
		}
		s |= 1 << n
	}
	return s, nil
}

// Names lists the set's capabilities sorted, unknown ones as their number.
func (s Set) Names() []string {
	var out []string
	for n := range 64 {
		if s&(1<<n) == 0 {
			continue
		}
		out = append(out, nameOf(n))
	}
	slices.Sort(out)
	return out
}

func nameOf(n int) string {
	for name, v := range names {
		if v == n {
			return name
		}
	}
	return "cap" + strconv.Itoa(n)
}

// String is the set's names joined by "+", or "none".
func (s Set) String() string {
	if s == 0 {
		return "none"
	}
	return strings.Join(s.Names(), "+")
}

// Exec gives the program exactly set and re-executes it with args and env;
// it returns only on error. The process must run as uid 0 with CAP_SETPCAP:
// execve gives a root process its bounding set (and inheritable set) as its
// permitted and effective sets, so dropping the bounding set to set on the
// thread that calls execve, and its inheritable set to nothing, leaves the
// new image, and every thread it starts, with exactly set.
func Exec(set Set, args, env []string) error {
	// Capabilities are per thread: this thread is dropped and makes the
	// execve; it is never handed back to the Go scheduler.
	runtime.LockOSThread()
	last, err := lastCap()
	if err != nil {
		return err
	}
	for n := 0; n <= last; n++ {
		if set&(1<<n) != 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(n), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", n, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if err := capset(set); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return syscall.Exec(exe, args, env)
}

// capset sets the calling thread's permitted and effective sets to set and
// its inheritable set to nothing.
func capset(set Set) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	for i := range data {
		data[i].Permitted = uint32(set >> (32 * i))
		data[i].Effective = uint32(set >> (32 * i))
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset %s: %w", set, err)
	}
	return nil
}

// lastCap is the kernel's highest capability number.
func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// ThreadSets reads one capability line (CapEff, CapPrm, CapBnd…) of every
// thread of this process, keyed by thread id.
func ThreadSets(field string) (map[string]Set, error) {
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	out := map[string]Set{}
	for _, tid := range tids {
		b, err := os.ReadFile("/proc/self/task/" + tid.Name() + "/status")
		if err != nil {
			return nil, err
		}
		s, err := statusSet(string(b), field)
		if err != nil {
			return nil, fmt.Errorf("thread %s: %w", tid.Name(), err)
		}
		out[tid.Name()] = s
	}
	return out, nil
}

// statusSet parses the hex capability line field of a /proc status file.
func statusSet(status, field string) (Set, error) {
	for line := range strings.SplitSeq(status, "\n") {
		v, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		return Set(n), err
	}
	return 0, fmt.Errorf("no %s line", field)
}
