package measure

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
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
	var c cpuClasses
	if t.CPUs == nil {
		return c
	}
	if t.CPUs.Isolated != nil {
		c.isolated, _ = cpulist.Parse(*t.CPUs.Isolated)
	}
	if t.CPUs.Reserved != nil {
		c.reserved, _ = cpulist.Parse(*t.CPUs.Reserved)
	}
	return c
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

func readCounterTable(path string) (counterTable, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return counterTable{}, err
	}
	return parseCounterTable(string(b))
}

// taskStat holds the /proc/<pid>/task/<tid>/stat fields the agent uses.
type taskStat struct {
	comm      string
	flags     uint64
	processor int
	rtPrio    int
	policy    int
}

// pfKthread is PF_KTHREAD in task flags.
const pfKthread = 0x00200000

// Scheduling policies (sched.h).
const (
	schedFIFO = 1
	schedRR   = 2
)

// parseTaskStat parses a stat line; comm may hold spaces and parentheses.
func parseTaskStat(line string) (taskStat, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return taskStat{}, fmt.Errorf("malformed stat %q", line)
	}
	f := strings.Fields(line[end+1:])
	// f[0] is field 3 (state); field N is f[N-3].
	if len(f) < 39 {
		return taskStat{}, fmt.Errorf("short stat line (%d fields)", len(f)+2)
	}
	var s taskStat
	var err error
	s.comm = line[open+1 : end]
	if s.flags, err = strconv.ParseUint(f[6], 10, 64); err != nil {
		return s, err
	}
	if s.processor, err = strconv.Atoi(f[36]); err != nil {
		return s, err
	}
	if s.rtPrio, err = strconv.Atoi(f[37]); err != nil {
		return s, err
	}
	s.policy, err = strconv.Atoi(f[38])
	return s, err
}

// taskDirs lists /proc/<pid>/task/<tid> directories of every task.
func taskDirs(root *host.Root) []string {
	pids, _ := root.ReadDir(root.Proc())
	var out []string
	for _, p := range pids {
		if !isNumber(p.Name()) {
			continue
		}
		tids, _ := root.ReadDir(root.Proc(p.Name(), "task"))
		for _, t := range tids {
			if isNumber(t.Name()) {
				out = append(out, root.Proc(p.Name(), "task", t.Name()))
			}
		}
	}
	return out
}

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

// statusField returns one "Key:\tvalue" field of a /proc status file.
func statusField(text, key string) string {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// procsRunning reads procs_running from /proc/stat.
func procsRunning(root *host.Root) (int, error) {
	b, err := root.ReadFile(root.Proc("stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "procs_running "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no procs_running in %s", root.Proc("stat"))
}

// onlineCPUs reads /sys/devices/system/cpu/online.
func onlineCPUs(root *host.Root) (cpuset.CPUSet, error) {
	s, err := root.ReadString(root.Sys("devices", "system", "cpu", "online"))
	if err != nil {
		return cpuset.New(), err
	}
	return cpulist.Parse(s)
}

// psiSomeAvg10 reads "some avg10=" of a PSI file (/proc/pressure/cpu or a
// cgroup v2 cpu.pressure).
func psiSomeAvg10(path string) (string, error) {
	b, err := os.ReadFile(path)
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
