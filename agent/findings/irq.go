package findings

import (
	"bufio"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/api/v1alpha1"
)

// CounterTable is a /proc/interrupts or /proc/softirqs snapshot: per row
// (IRQ number or softirq name), the count on each CPU, plus a label.
type CounterTable struct {
	cpus   []int // CPU number of each column
	rows   map[string][]uint64
	labels map[string]string
}

// CounterWindow is a counter table at a window's start and end; OK says
// both were read.
type CounterWindow struct {
	Prev, Cur CounterTable
	OK        bool
}

// ParseCounterTable parses the CPU-column format of /proc/interrupts and
// /proc/softirqs: a header "CPU0 CPU1 ..." then "<key>: <n> <n> ... [label]".
// Both are parsed here: procfs's Interrupts drops which CPU each column
// belongs to (columns skip offline CPUs) and its Softirqs has no row per
// softirq name.
func ParseCounterTable(text string) (CounterTable, error) {
	t := CounterTable{rows: map[string][]uint64{}, labels: map[string]string{}}
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
func (t CounterTable) deltaOn(prev CounterTable, cpus cpuset.CPUSet, keep func(key string) bool) []rowDelta {
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
	slices.SortFunc(out, func(a, b rowDelta) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
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

func irqsOnIsolated(o Observation) *v1alpha1.Finding {
	if o.Isolated.IsEmpty() || !o.IRQs.OK {
		return nil
	}
	d := o.IRQs.Cur.deltaOn(o.IRQs.Prev, o.Isolated, isNumber)
	if len(d) == 0 {
		return nil
	}
	return finding(FindingIRQsIsolated, SeverityWarning,
		"%d device interrupts fired on isolated CPUs %s in the last window (%s); steer them with irq.affinity: Reserved (managed IRQs also need isolcpus=managed_irq)",
		sumDeltas(d), o.Isolated, describeDeltas(d, "irq "))
}

// tickSoftirqs come with the tick and RCU; isolation flags, not affinity,
// remove them, so they are left out of the softirq finding.
var tickSoftirqs = map[string]bool{"TIMER": true, "SCHED": true, "RCU": true, "HRTIMER": true}

func softirqsOnIsolated(o Observation) *v1alpha1.Finding {
	if o.Isolated.IsEmpty() || !o.Softirqs.OK {
		return nil
	}
	d := o.Softirqs.Cur.deltaOn(o.Softirqs.Prev, o.Isolated, func(k string) bool { return !tickSoftirqs[k] })
	if len(d) == 0 {
		return nil
	}
	return finding(FindingSoftirqsIsolated, SeverityWarning,
		"%d softirqs ran on isolated CPUs %s in the last window (%s); move the interrupts that raise them (and RPS/XPS masks) to the reserved CPUs",
		sumDeltas(d), o.Isolated, describeDeltas(d, ""))
}

func sumDeltas(d []rowDelta) uint64 {
	var n uint64
	for _, r := range d {
		n += r.n
	}
	return n
}

func describeDeltas(d []rowDelta, prefix string) string {
	var parts []string
	for i, r := range d {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(d)-5))
			break
		}
		label := ""
		if r.label != "" {
			label = " [" + lastField(r.label) + "]"
		}
		parts = append(parts, fmt.Sprintf("%s%s%s: %d", prefix, r.key, label, r.n))
	}
	return strings.Join(parts, ", ")
}

func lastField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// irqbalance rewrites IRQ affinity every 10 s; it leaves alone the CPUs in
// IRQBALANCE_BANNED_CPUS / IRQBALANCE_BANNED_CPULIST and (recent versions)
// the kernel's isolcpus and nohz_full CPUs.
func irqbalance(o Observation) *v1alpha1.Finding {
	if o.Isolated.IsEmpty() {
		return nil
	}
	kernelBanned := facts.FlagCPUs(o.Isolation, "isolcpus", "nohz_full")
	for _, ib := range o.IRQBalances {
		banned := ib.Banned.Union(kernelBanned)
		if missing := o.Isolated.Difference(banned); !missing.IsEmpty() {
			return finding(FindingIRQBalance, SeverityWarning,
				"irqbalance (pid %d) runs without isolated CPUs %s banned (banned: %q); it moves IRQs back onto them every 10s: set IRQBALANCE_BANNED_CPULIST=%s or stop it",
				ib.PID, missing, banned.String(), o.Isolated)
		}
	}
	return nil
}
