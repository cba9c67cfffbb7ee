package measure

import (
	"bufio"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/snapshot"
	"latencytier.io/latencytier/api/v1alpha1"
)

// CPU classes in status.
const (
	ClassNode     = "Node"
	ClassIsolated = "Isolated"
	ClassReserved = "Reserved"
)

// cpuClasses are the profile's isolated and reserved CPU sets (empty when
// unset or unparsable).
type cpuClasses struct {
	isolated, reserved cpuset.CPUSet
}

func classesOf(t v1alpha1.TuningSpec) cpuClasses {
	return classesFrom(snapshot.ParseCPUs(t.CPUs))
}

func classesFrom(c snapshot.CPUs) cpuClasses {
	return cpuClasses{isolated: c.Isolated, reserved: c.Reserved}
}

// counterTable is a /proc/interrupts or /proc/softirqs snapshot: per row
// (IRQ number or softirq name), the count on each CPU, plus a label.
type counterTable struct {
	cpus   []int // CPU number of each column
	rows   map[string][]uint64
	labels map[string]string
}

// parseCounterTable parses the CPU-column format of /proc/interrupts and
// /proc/softirqs: a header "CPU0 CPU1 ..." then "<key>: <n> <n> ... [label]".
func parseCounterTable(text string) (counterTable, error) {
	t := counterTable{rows: map[string][]uint64{}, labels: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	if !sc.Scan() {
		return t, fmt.Errorf("empty counter table")
	}
	for _, f := range strings.Fields(sc.Text()) {
		n, err := strconv.Atoi(strings.TrimPrefix(f, "CPU"))
		if err != nil {
			return t, fmt.Errorf("bad CPU header %q", f)
		}
		t.cpus = append(t.cpus, n)
	}
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		counts := make([]uint64, 0, len(t.cpus))
		i := 0
		for ; i < len(fields) && len(counts) < len(t.cpus); i++ {
			n, err := strconv.ParseUint(fields[i], 10, 64)
			if err != nil {
				break
			}
			counts = append(counts, n)
		}
		k := strings.TrimSpace(key)
		t.rows[k] = counts
		t.labels[k] = strings.Join(fields[i:], " ")
	}
	return t, sc.Err()
}

// rowDelta is how much one row grew on a set of CPUs since prev.
type rowDelta struct {
	key, label string
	n          uint64
}

// deltaOn returns the rows that grew on cpus since prev, biggest first.
func (t counterTable) deltaOn(prev counterTable, cpus cpuset.CPUSet, keep func(key string) bool) []rowDelta {
	var out []rowDelta
	for key, counts := range t.rows {
		if !keep(key) {
			continue
		}
		old := prev.rows[key]
		var n uint64
		for col, c := range counts {
			if col >= len(t.cpus) || !cpus.Contains(t.cpus[col]) {
				continue
			}
			var o uint64
			if col < len(old) {
				o = old[col]
			}
			if c > o {
				n += c - o
			}
		}
		if n > 0 {
			out = append(out, rowDelta{key: key, label: t.labels[key], n: n})
		}
	}
	sortDeltas(out)
	return out
}

func sortDeltas(d []rowDelta) {
	slices.SortFunc(d, func(a, b rowDelta) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
}

// readCounterTable reads /proc/interrupts or /proc/softirqs. Both are parsed
// here: procfs's Interrupts drops which CPU each column belongs to (columns
// skip offline CPUs) and its Softirqs has no row per softirq name.
func readCounterTable(root *host.Root, path string) (counterTable, error) {
	b, err := root.ReadFile(path)
	if err != nil {
		return counterTable{}, err
	}
	return parseCounterTable(string(b))
}

// procFS is the host root's /proc as prometheus/procfs reads it, so a
// temp-dir root stands in for the host's tasks in tests.
func procFS(root *host.Root) (procfs.FS, error) { return procfs.NewFS(root.Proc()) }

// pfKthread is PF_KTHREAD in task flags.
const pfKthread = 0x00200000

// Scheduling policies (sched.h).
const (
	schedFIFO = 1
	schedRR   = 2
)

// task is one thread of the host, /proc/<pid>/task/<tid>.
type task struct {
	pid, tid int
	proc     procfs.Proc // reads the thread's own stat, schedstat and status
}

// key names the task across windows.
func (t task) key() string { return strconv.Itoa(t.pid) + "/" + strconv.Itoa(t.tid) }

// tasks lists every thread of every process under the host root's /proc.
func tasks(root *host.Root) []task {
	fs, err := procFS(root)
	if err != nil {
		return nil
	}
	procs, _ := fs.AllProcs()
	var out []task
	for _, p := range procs {
		threads, _ := fs.AllThreads(p.PID)
		for _, th := range threads {
			out = append(out, task{pid: p.PID, tid: th.PID, proc: th})
		}
	}
	return out
}

// isNumber reports whether s is a decimal number (a numbered IRQ row).
func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// procsRunning reads procs_running from /proc/stat.
func procsRunning(root *host.Root) (int, error) {
	fs, err := procFS(root)
	if err != nil {
		return 0, err
	}
	st, err := fs.Stat()
	if err != nil {
		return 0, err
	}
	return int(st.ProcessesRunning), nil
}

// onlineCPUs reads /sys/devices/system/cpu/online.
func onlineCPUs(root *host.Root) (cpuset.CPUSet, error) {
	s, err := root.ReadString(root.Sys("devices", "system", "cpu", "online"))
	if err != nil {
		return cpuset.New(), err
	}
	return cpulist.Parse(s)
}

// nodePressure reads "some avg10" of /proc/pressure/cpu, formatted as the
// kernel prints it.
func nodePressure(root *host.Root) (string, error) {
	fs, err := procFS(root)
	if err != nil {
		return "", err
	}
	psi, err := fs.PSIStatsForResource("cpu")
	if err != nil {
		return "", err
	}
	if psi.Some == nil {
		return "", fmt.Errorf("no some line in %s", root.Proc("pressure", "cpu"))
	}
	return strconv.FormatFloat(psi.Some.Avg10, 'f', 2, 64), nil
}

// cgroupPressure reads "some avg10=" of a cgroup v2 cpu.pressure. The file
// has /proc/pressure/cpu's format, but procfs only reads the latter, so it
// is parsed here.
func cgroupPressure(root *host.Root, path string) (string, error) {
	b, err := root.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "some ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "avg10="); ok {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("no some avg10 in %s", path)
}
