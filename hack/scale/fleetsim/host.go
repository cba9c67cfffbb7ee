package fleetsim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"latencytier.io/latencytier/agent/host"
)

// nodeBehaviour is what a simulated node does beyond applying its spec.
type nodeBehaviour int

const (
	// nodeNormal applies, holds and measures a steady run-queue latency.
	nodeNormal nodeBehaviour = iota
	// nodeDrifts has something else rewrite autogroup every few seconds, so
	// its agent finds drift and re-asserts.
	nodeDrifts
	// nodeFails cannot write numa_balancing (its file is a directory): the node
	// reports Applied False, PartiallyApplied.
	nodeFails
	// nodeRegresses measures a 5× higher run-queue latency after the first spec
	// change (what a rollout's verification is there to catch).
	nodeRegresses
	// nodeVanishes has its Node deleted (and its agent stopped) after the steady
	// window.
	nodeVanishes
)

func (b nodeBehaviour) String() string {
	return [...]string{"normal", "drifts", "fails", "regresses", "vanishes"}[b]
}

// fakeHost is one simulated node's host root: a 2-CPU EEVDF kernel layout
// in a temp dir (what the agent reads and writes instead of /proc and /sys)
// whose two tasks' schedstat counters the simulator advances, so the real
// Measurer (schedstat source) measures a run-queue latency we choose.
type fakeHost struct {
	root *host.Root
	b    nodeBehaviour

	mu       sync.Mutex
	regress  bool
	slices   uint64
	delayNS  uint64
	meanWait time.Duration
	// elapsed is the simulated time ticked so far; every wanderEvery of it
	// the wait steps to the next of wander's factors, from a per-node
	// phase, as a real node's run-queue p99 wanders window to window
	// (issue 43: a counter that never moved hid every write a wander
	// costs).
	elapsed     time.Duration
	wanderEvery time.Duration
	phase       int
}

// wander is the factors a simulated node's mean wait steps through, one
// per wanderEvery. A node whose mean lies near a 1-2-5 boundary (46–51 µs
// of the fleet's 40–80 µs: about one in eight) crosses it window after
// window, as a real node's p99 does under ordinary load; under the old
// bucket rule each of those wrote every window. The factors stay within
// ×1.1 of each other, inside the verdict's Unchanged band (0.9–1.2× the
// baseline), so the manager's evidence-only verdicts do not flip with the
// wander and a run still settles.
var wander = []float64{1.0, 1.08, 0.98, 1.07, 1.01, 1.06}

// hostFiles is the kernel layout of a simulated node (relative path →
// content; "/" is an empty directory). sys/kernel/debug/sched exists, so the
// agent never tries to mount debugfs.
var hostFiles = map[string]string{
	"proc/sys/kernel/random/boot_id":           "11111111-2222-3333-4444-555555555555",
	"proc/sys/kernel/osrelease":                "6.6.8",
	"proc/sys/kernel/sched_autogroup_enabled":  "1",
	"proc/sys/kernel/numa_balancing":           "1",
	"proc/sys/kernel/sched_rt_runtime_us":      "950000",
	"proc/irq/default_smp_affinity":            "3",
	"proc/irq/24/smp_affinity_list":            "0-1",
	"proc/irq/41/smp_affinity_list":            "0-1",
	"proc/cmdline":                             "ro quiet",
	"proc/pressure/cpu":                        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0",
	"proc/stat":                                "cpu  1 0 1 100 0 0 0 0 0 0\nprocs_running 1",
	"sys/kernel/debug/sched/base_slice_ns":     "3000000",
	"sys/kernel/debug/sched/migration_cost_ns": "500000",
	"sys/devices/system/cpu/online":            "0-1",
	"sys/fs/cgroup/cgroup.controllers":         "cpuset cpu",
	"sys/fs/cgroup/cgroup.subtree_control":     "cpuset cpu",
	"sys/fs/cgroup/system.slice/cpuset.cpus":   "",
	"sys/fs/cgroup/user.slice/cpuset.cpus":     "",
	"sys/fs/cgroup/init.scope/cpuset.cpus":     "",
}

// tasks are the simulated node's threads: pid → the CPU it last ran on.
var tasks = map[int]int{100: 0, 101: 1}

func newFakeHost(dir string, b nodeBehaviour, meanWait, wanderEvery time.Duration, phase int) (*fakeHost, error) {
	for rel, content := range hostFiles {
		if err := writeFile(filepath.Join(dir, rel), content+"\n"); err != nil {
			return nil, err
		}
	}
	for pid, cpu := range tasks {
		d := filepath.Join(dir, "proc", fmt.Sprint(pid), "task", fmt.Sprint(pid))
		// stat: field 39 is the CPU the task last ran on; all 52 fields,
		// as procfs reads them (a shorter line is EOF: the task "exited").
		fields := append([]string{fmt.Sprint(pid), "(worker)", "S"}, strings.Fields(strings.Repeat("0 ", 35))...)
		fields = append(fields, fmt.Sprint(cpu))
		fields = append(fields, strings.Fields(strings.Repeat("0 ", 13))...)
		if err := writeFile(filepath.Join(d, "stat"), strings.Join(fields, " ")+"\n"); err != nil {
			return nil, err
		}
	}
	if b == nodeFails {
		p := filepath.Join(dir, "proc/sys/kernel/numa_balancing")
		if err := os.Remove(p); err != nil {
			return nil, err
		}
		if err := os.Mkdir(p, 0o755); err != nil {
			return nil, err
		}
	}
	h := &fakeHost{root: host.New(dir), b: b, meanWait: meanWait, wanderEvery: wanderEvery, phase: phase}
	return h, h.tick(0)
}

// tick advances the tasks' schedstat by d of running at 1000 timeslices a
// second, each waiting the node's mean wait times its wander factor, and
// rewrites drifting knobs.
func (h *fakeHost) tick(d time.Duration) error {
	h.mu.Lock()
	n := uint64(d.Milliseconds())
	f := 1.0
	if h.wanderEvery > 0 {
		f = wander[(h.phase+int(h.elapsed/h.wanderEvery))%len(wander)]
	}
	h.elapsed += d
	wait := uint64(f * float64(h.meanWait.Nanoseconds()))
	if h.regress {
		wait *= 5
	}
	h.slices += n
	h.delayNS += n * wait
	line := fmt.Sprintf("%d %d %d\n", h.slices*1000, h.delayNS, h.slices)
	h.mu.Unlock()
	for pid := range tasks {
		p := h.root.Proc(fmt.Sprint(pid), "task", fmt.Sprint(pid), "schedstat")
		if err := writeFile(p, line); err != nil {
			return err
		}
	}
	if h.b == nodeDrifts && d > 0 {
		return writeFile(h.root.Proc("sys", "kernel", "sched_autogroup_enabled"), "1\n")
	}
	return nil
}

// startRegression makes a nodeRegresses node measure worse from now on.
func (h *fakeHost) startRegression() {
	if h.b != nodeRegresses {
		return
	}
	h.mu.Lock()
	h.regress = true
	h.mu.Unlock()
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// isTmpfs reports whether dir is on a tmpfs.
func isTmpfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.TMPFS_MAGIC
}
