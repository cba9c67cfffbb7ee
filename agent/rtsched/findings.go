package rtsched

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/printable"
)

// Finding types about real-time tasks this package checks.
const (
	// findingRTOnReserved: user-space real-time tasks may run on the
	// reserved (housekeeping) CPUs, where they preempt kubelet, system
	// services, IRQ threads and ksoftirqd.
	findingRTOnReserved = "RTTasksOnReservedCPUs"
	// findingRTThrottled: the kernel throttled real-time tasks (RT
	// bandwidth, kernel.sched_rt_runtime_us): their work was cut.
	findingRTThrottled = "RTThrottled"
)

const severityWarning = "Warning"

// Bounds on the host-wide scans.
const (
	maxTasks      = 1 << 16
	maxKmsgRecs   = 1 << 15
	maxSyslogBuf  = 16 << 20
	maxSchedDebug = 4 << 20
	throttleMsg   = "sched: RT throttling activated"
)

// Findings are the real-time checks: real-time tasks allowed on the reserved
// CPUs (only when the profile reserves some), and real-time throttling seen
// this boot (the kernel log) or now (debugfs sched/debug, when mounted). A
// SCHED_FIFO/SCHED_RR task runs ahead of every CFS task on its CPU, so one on
// the reserved CPUs starves the housekeeping there; RT bandwidth throttling
// (kernel.sched_rt_runtime_us, 950000 us of every 1000000 us by default)
// stops all RT tasks for the rest of the period, cutting their work.
func Findings(root *host.Root, reserved cpuset.CPUSet) []v1alpha1.Finding {
	var out []v1alpha1.Finding
	if f := rtOnReserved(root, reserved); f != nil {
		out = append(out, *f)
	}
	if f := throttled(root); f != nil {
		out = append(out, *f)
	}
	return out
}

func rtOnReserved(root *host.Root, reserved cpuset.CPUSet) *v1alpha1.Finding {
	if reserved.IsEmpty() {
		return nil
	}
	var hits []string
	n := 0
	pids, _ := root.ReadDir(root.Proc())
	for _, p := range pids {
		if _, err := strconv.Atoi(p.Name()); err != nil || n > maxTasks {
			continue
		}
		tids, _ := root.ReadDir(root.Proc(p.Name(), "task"))
		for _, t := range tids {
			if n++; n > maxTasks {
				break
			}
			dir := root.Proc(p.Name(), "task", t.Name())
			st, err := readStat(dir + "/stat")
			if err != nil || st.flags&pfKthread != 0 || (st.policy != unix.SCHED_FIFO && st.policy != unix.SCHED_RR) {
				continue
			}
			status, _ := readBounded(dir+"/status", maxStat*4)
			allowed, err := cpulist.Parse(statusField(string(status), "Cpus_allowed_list"))
			if err != nil || allowed.Intersection(reserved).IsEmpty() {
				continue
			}
			hits = append(hits, fmt.Sprintf("%s (tid %s, prio %d, cpus %s)", st.comm, t.Name(), st.rtPrio, allowed))
		}
	}
	if len(hits) == 0 {
		return nil
	}
	shown := hits[:min(len(hits), 5)]
	return &v1alpha1.Finding{Type: findingRTOnReserved, Severity: severityWarning, Message: fmt.Sprintf(
		"%d real-time tasks may run on the reserved CPUs %s, where they preempt kubelet, system services and IRQ threads (real-time threads belong on isolated CPUs, where nothing else waits for them): %s",
		len(hits), reserved, strings.Join(shown, "; "))}
}

func statusField(status, key string) string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func throttled(root *host.Root) *v1alpha1.Finding {
	logged := kernelLogHas(root, throttleMsg)
	now := throttledNow(root)
	if !logged && len(now) == 0 {
		return nil
	}
	var evidence []string
	if logged {
		evidence = append(evidence, fmt.Sprintf("the kernel logged %q this boot", throttleMsg))
	}
	if len(now) > 0 {
		evidence = append(evidence, "throttled now: "+strings.Join(now[:min(len(now), 5)], ", "))
	}
	return &v1alpha1.Finding{Type: findingRTThrottled, Severity: severityWarning, Message: fmt.Sprintf(
		"real-time tasks used up their RT bandwidth (kernel.sched_rt_runtime_us per sched_rt_period_us) and were stopped until the next period: %s. A real-time thread that spins needs isolated CPUs; one that only bursts needs more runtime",
		strings.Join(evidence, "; "))}
}

// kernelLogHas reports whether the kernel logged msg this boot: from the
// host root's /dev/kmsg when it opens (a bare node, a privileged pod, a
// test root's file), else through syslog(2). An unprivileged pod cannot
// open the device (the device cgroup refuses it, and /dev is not mounted
// from the host); syslog(2) needs CAP_SYSLOG and no device. It reads the
// running kernel's log, so it is asked only when the root's /proc is a
// procfs (the running kernel's): a test root without dev/kmsg has none.
func kernelLogHas(root *host.Root, msg string) bool {
	if found, err := kmsgHas(root.Path("dev", "kmsg"), msg); err == nil {
		return found
	}
	var st unix.Statfs_t
	if unix.Statfs(root.Proc(), &st) != nil || st.Type != unix.PROC_SUPER_MAGIC {
		return false
	}
	return syslogHas(msg)
}

// kmsgHas reads the kernel log records from the start of the buffer
// without blocking (one record a read; EAGAIN at the end) and reports
// whether one holds msg; err is set only when path does not open. Raw
// syscalls: an os.File opened O_NONBLOCK would park in the poller at the
// end of /dev/kmsg instead of returning.
func kmsgHas(path, msg string) (bool, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 8192)
	for i := 0; i < maxKmsgRecs; i++ {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.EINTR) {
			continue // records overwritten while reading: go on
		}
		if err != nil || n <= 0 {
			return false, nil // EAGAIN: the end (a regular file: EOF)
		}
		// One record a read from /dev/kmsg; a regular file (a test
		// root) gives several: a record starts every line that does not
		// start with a space (those continue its dictionary).
		for _, line := range bytes.Split(buf[:n], []byte("\n")) {
			if text, ok := kernelRecord(line); ok && strings.Contains(text, msg) {
				return true, nil
			}
		}
	}
	return false, nil
}

// syslog(2) actions (linux/syslog.h; golang.org/x/sys names none).
const (
	syslogActionReadAll    = 3
	syslogActionSizeBuffer = 10
)

// syslogHas reads the whole kernel log buffer with syslog(2)
// SYSLOG_ACTION_READ_ALL (CAP_SYSLOG; it consumes nothing) and reports
// whether a record of the kernel's holds msg.
func syslogHas(msg string) bool {
	size, err := unix.Klogctl(syslogActionSizeBuffer, nil)
	if err != nil || size <= 0 {
		return false
	}
	// READ_ALL returns the newest records that fit, each line with its
	// "<pri>[time] " prefix: room for those beyond the buffer's size.
	buf := make([]byte, min(2*size, maxSyslogBuf))
	n, err := unix.Klogctl(syslogActionReadAll, buf)
	if err != nil || n <= 0 {
		return false
	}
	return syslogTextHas(buf[:n], msg)
}

// syslogTextHas reports whether a line of SYSLOG_ACTION_READ_ALL text the
// kernel logged holds msg.
func syslogTextHas(text []byte, msg string) bool {
	for _, line := range bytes.Split(text, []byte("\n")) {
		if t, ok := syslogLine(line); ok && strings.Contains(t, msg) {
			return true
		}
	}
	return false
}

// syslogLine is the rest of a line of syslog(2) text ("<pri>[time] text",
// the time when printk.time is on) when the kernel logged it: facility
// (pri >> 3) 0, the rule kernelRecord keeps for /dev/kmsg. The kernel
// repeats the prefix on every line of a multi-line record, so a
// continuation line carries its record's facility; a line without a prefix
// (none should come) is nobody's word.
func syslogLine(line []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("<"))
	if !ok {
		return "", false
	}
	pri, text, ok := bytes.Cut(rest, []byte(">"))
	if !ok {
		return "", false
	}
	p, err := strconv.Atoi(string(pri))
	if err != nil || p < 0 || p>>3 != 0 {
		return "", false
	}
	return string(text), true
}

// kernelRecord is the message of a /dev/kmsg record
// ("<pri>,<seq>,<usec>,<flags>[,...];<message>\n[ KEY=value\n...]") when the
// kernel logged it: facility (pri >> 3) 0. Anyone root in a container may
// write /dev/kmsg, and the kernel files such lines under facility user (1)
// or whatever nonzero facility the writer names, never 0; so only facility
// 0 is the kernel's word.
func kernelRecord(rec []byte) (string, bool) {
	prefix, rest, ok := bytes.Cut(rec, []byte(";"))
	if !ok {
		return "", false
	}
	pri, _, _ := bytes.Cut(prefix, []byte(","))
	p, err := strconv.Atoi(string(pri))
	if err != nil || p < 0 || p>>3 != 0 {
		return "", false
	}
	text, _, _ := bytes.Cut(rest, []byte("\n"))
	return string(text), true
}

// throttledNow lists the run queues debugfs sched/debug shows throttled
// ("rt_rq[1]:/kubepods/..." with ".rt_throttled : 1").
func throttledNow(root *host.Root) []string {
	b, err := readBounded(root.DebugSched("debug"), maxSchedDebug)
	if err != nil {
		return nil
	}
	var out []string
	rq := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "rt_rq[") {
			rq = printable.String(strings.TrimSuffix(strings.TrimSpace(line), ":")) // cgroup names are tenants' too
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if ok && rq != "" && strings.TrimSpace(k) == ".rt_throttled" && strings.TrimSpace(v) != "0" {
			out = append(out, rq)
		}
	}
	return out
}
