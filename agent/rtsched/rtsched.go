// Package rtsched gives the threads of opted-in pods a real-time scheduling
// policy (SCHED_FIFO, SCHED_RR) when the profile's realtime field grants it,
// and owns the findings about real-time tasks (on the reserved CPUs, or
// throttled by the kernel's RT bandwidth limit).
//
// Why a knob kind and not a journaled step of its own: the engine
// (agent/apply) already journals every original before the first write,
// re-asserts on drift, restores what a changed spec no longer wants, leaves a
// value someone else changed (Conflict), gives up on a restore that keeps
// failing and survives a crash between journal and write. A thread's
// scheduling policy is one more value of that shape, so each thread is one
// knob: its Path is "sched:<tid>@<start time>" (not a file; the engine's
// io.go sends such paths to Read and Write here, as it sends "systemd:"
// paths to agent/systemd) and its value is "<policy>:<n>":
//
//	fifo:50, rr:10     SCHED_FIFO / SCHED_RR at priority n (1-99)
//	other:0, batch:5   SCHED_OTHER / SCHED_BATCH at nice n (-20..19)
//	idle:0             SCHED_IDLE (n is the nice value, kept for revert)
//
// The journal therefore holds every thread's policy and nice value before
// the agent's first change, and revert writes them back to every thread
// still alive; a thread that exited reads as gone (fs.ErrNotExist) and is
// dropped, like a removed cgroup. The start time in the path makes a tid the
// kernel reuses for a new thread a different knob, never the old one's
// original.
//
// Real-time values are written with SCHED_FLAG_RESET_ON_FORK: a thread or
// process the pod starts later begins as SCHED_OTHER at nice 0, not as an
// inherited copy of the agent's value that the journal would take for an
// original; the next pass finds it, journals it and sets the policy. Until
// then (one resync interval) it runs as SCHED_OTHER.
//
// sched_setattr takes a tid in the caller's pid namespace, while the
// threads are found under the host root's /proc (the host's namespace).
// Read and Write refuse unless the two are the same namespace, so a tid is
// never applied to an unrelated task of the agent's own namespace. Only
// the latencytier-agent-hostpid DaemonSet shares the host's pid namespace,
// and the manager places it only on nodes whose profile grants realtime or
// whose threads are still held; the check is made on every pass.
package rtsched

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
)

// pathPrefix starts the path of a thread's scheduling policy knob.
const pathPrefix = "sched:"

// IsPath reports whether a knob or journal path names a thread's policy.
func IsPath(p string) bool { return strings.HasPrefix(p, pathPrefix) }

// Access reaches a thread's scheduling policy (sched_getattr and
// sched_setattr, Read and Write); the journal records its entries as kind
// "thread". Restoring one needs the host's pid namespace.
var Access = &knob.Access{Name: "thread", Claims: IsPath, NeedsHostPID: true,
	Read:  func(env knob.Env, path string) (string, error) { return Read(env.Root, path) },
	Write: func(env knob.Env, path, value string) error { return Write(env.Root, path, value) },
}

// threadPath is the knob path of thread tid, started at start (clock ticks after
// boot, /proc/<tid>/stat field 22).
func threadPath(tid int, start uint64) string {
	return pathPrefix + strconv.Itoa(tid) + "@" + strconv.FormatUint(start, 10)
}

func parsePath(p string) (tid int, start uint64, err error) {
	rest, ok := strings.CutPrefix(p, pathPrefix)
	t, s, found := strings.Cut(rest, "@")
	if ok && found && len(t) <= 10 && len(s) <= 20 {
		tid, err = strconv.Atoi(t)
		if err == nil && tid > 0 {
			start, err = strconv.ParseUint(s, 10, 64)
			if err == nil {
				return tid, start, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("not a thread policy path: %q", p)
}

// Value is a thread's scheduling policy with its priority (real-time) or
// nice value (the others).
type Value struct {
	Policy string
	N      int
}

// Policies the agent reads and writes, by their value names.
var policies = map[string]uint32{
	"other": unix.SCHED_NORMAL, "batch": unix.SCHED_BATCH, "idle": unix.SCHED_IDLE,
	"fifo": unix.SCHED_FIFO, "rr": unix.SCHED_RR,
}

// isRealtime reports whether the policy is SCHED_FIFO or SCHED_RR.
func (v Value) isRealtime() bool { return v.Policy == "fifo" || v.Policy == "rr" }

func (v Value) String() string { return v.Policy + ":" + strconv.Itoa(v.N) }

// parseValue parses a knob value strictly: a known policy, a colon, and a
// priority 1-99 (fifo, rr) or a nice value -20..19 (other, batch, idle).
func parseValue(s string) (Value, error) {
	name, n, ok := strings.Cut(s, ":")
	if _, known := policies[name]; !ok || !known || len(n) == 0 || len(n) > 3 {
		return Value{}, fmt.Errorf("not a scheduling value %q (want fifo:1-99, rr:1-99, other:nice, batch:nice, idle:nice)", s)
	}
	v := Value{Policy: name}
	var err error
	if v.N, err = strconv.Atoi(n); err != nil || strconv.Itoa(v.N) != n {
		return Value{}, fmt.Errorf("not a scheduling value %q: %q is not a plain number", s, n)
	}
	lo, hi := -20, 19
	if v.isRealtime() {
		lo, hi = 1, 99
	}
	if v.N < lo || v.N > hi {
		return Value{}, fmt.Errorf("scheduling value %q: %d is outside %d..%d", s, v.N, lo, hi)
	}
	return v, nil
}

// fromAttr is the value of a sched_getattr result; ok is false for
// policies the agent does not manage (SCHED_DEADLINE, sched_ext).
func fromAttr(a *unix.SchedAttr) (Value, bool) {
	for name, p := range policies {
		if p != a.Policy {
			continue
		}
		if name == "fifo" || name == "rr" {
			return Value{Policy: name, N: int(a.Priority)}, true
		}
		return Value{Policy: name, N: int(a.Nice)}, true
	}
	return Value{Policy: "policy" + strconv.Itoa(int(a.Policy))}, false
}

func (v Value) attr() *unix.SchedAttr {
	a := &unix.SchedAttr{Policy: policies[v.Policy]}
	if v.isRealtime() {
		a.Priority, a.Flags = uint32(v.N), unix.SCHED_FLAG_RESET_ON_FORK
	} else {
		a.Nice = int32(v.N)
	}
	return a
}

// errOtherNamespace refuses a thread path when the agent's pid namespace is
// not the host root's. It names the remedy: the manager moves a node to the
// hostPID agent (latencytier-agent-hostpid, config/agent) only while its
// profile grants realtime, so an agent without it is one whose node has not
// switched yet, or one run outside those DaemonSets.
var errOtherNamespace = errors.New("the agent's pid namespace is not the host's: sched_setattr would name other tasks than the host root's /proc lists; " +
	"grant realtime in the node's LatencyProfile (spec.realtime): the manager then moves the node to the hostPID agent (DaemonSet latencytier-agent-hostpid)")

// sameNamespace reports nil when the agent's pid namespace is the one the
// host root's /proc belongs to: there the agent's own status (self) lists a
// single NSpid, its own pid. A /proc of an ancestor namespace lists the
// agent's pid at each level, from that namespace down to its own.
func sameNamespace(root *host.Root) error {
	b, err := readBounded(root.Proc("self", "status"), maxStat*4)
	if err != nil {
		return fmt.Errorf("%w (%v)", errOtherNamespace, err)
	}
	ns := strings.Fields(statusField(string(b), "NSpid"))
	if len(ns) != 1 || ns[0] != strconv.Itoa(os.Getpid()) {
		return fmt.Errorf("%w (NSpid %v under %s, own pid %d)", errOtherNamespace, ns, root.Proc(), os.Getpid())
	}
	return nil
}

// thread checks that tid is still the thread that started at start; a
// thread that exited (or whose tid now names another) is fs.ErrNotExist.
func thread(root *host.Root, path string) (int, error) {
	tid, start, err := parsePath(path)
	if err != nil {
		return 0, err
	}
	if err := sameNamespace(root); err != nil {
		return 0, err
	}
	st, err := readStat(root.Proc(strconv.Itoa(tid), "stat"))
	if err != nil {
		return 0, err
	}
	if st.start != start {
		return 0, fmt.Errorf("thread %d started at %d, now names one started at %d: %w", tid, start, st.start, fs.ErrNotExist)
	}
	return tid, nil
}

// gone maps ESRCH (the thread exited between the check and the call) to
// fs.ErrNotExist, which the engine reads as "gone", not as a failure.
func gone(tid int, err error) error {
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("thread %d exited: %w", tid, fs.ErrNotExist)
	}
	return err
}

// Read returns a thread's value. A policy the agent does not manage reads
// as "policy<n>:0", which no knob wants, so it is never taken for settled.
func Read(root *host.Root, path string) (string, error) {
	tid, err := thread(root, path)
	if err != nil {
		return "", err
	}
	a, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return "", gone(tid, fmt.Errorf("sched_getattr %d: %w", tid, err))
	}
	v, _ := fromAttr(a)
	return v.String(), nil
}

// Write sets a thread's policy and priority or nice value.
func Write(root *host.Root, path, value string) error {
	v, err := parseValue(value)
	if err != nil {
		return fmt.Errorf("%w: %w", err, unix.EINVAL)
	}
	tid, err := thread(root, path)
	if err != nil {
		return err
	}
	if err := unix.SchedSetAttr(tid, v.attr(), 0); err != nil {
		return gone(tid, fmt.Errorf("sched_setattr %d %s: %w", tid, value, err))
	}
	return nil
}
