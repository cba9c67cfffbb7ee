package measure

import (
	"fmt"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/measure/bpf"
	"latencytier.io/latencytier/api/v1alpha1"
)

// Sources of run-queue latency, as status reports them.
const (
	SourceEBPF      = "EBPF"
	SourceSchedstat = "Schedstat"
)

// bpfSource turns the tracer's cumulative per-CPU histograms (of every
// task, and of the measured pods' tasks) into per-CPU deltas since the
// previous read.
type bpfSource struct {
	t        *bpf.Tracer
	prev     []bpf.CPUHist
	prevPods []bpf.CPUHist
}

func (s *bpfSource) perCPU() ([]Hist, error) { return delta(s.t.Read, &s.prev) }

func (s *bpfSource) pods() ([]Hist, error) { return delta(s.t.ReadPods, &s.prevPods) }

// delta reads cumulative histograms and returns their growth since *prev,
// which it updates.
func delta(read func() ([]bpf.CPUHist, error), prev *[]bpf.CPUHist) ([]Hist, error) {
	cur, err := read()
	if err != nil {
		return nil, err
	}
	out := make([]Hist, len(cur))
	for cpu := range cur {
		for i, c := range cur[cpu].Slots {
			var p uint64
			if cpu < len(*prev) {
				p = (*prev)[cpu].Slots[i]
			}
			if c >= p {
				out[cpu].Slots[i] = c - p
			}
		}
		out[cpu].MaxNs = cur[cpu].MaxNs
	}
	*prev = cur
	return out, nil
}

// schedstatSource is the fallback where BPF is not allowed: per task, the
// growth of /proc/<pid>/task/<tid>/schedstat run_delay over the growth of
// its timeslice count is the task's mean wait per run in the window. Each
// task adds that mean, weighted by its timeslices, to the histogram of the
// CPU it last ran on. Percentiles are therefore over per-task means, not
// single wakeups: coarser than BPF, but the same unit and classes.
type schedstatSource struct {
	root *host.Root
	prev map[string]taskDelay
}

type taskDelay struct {
	delay, slices uint64
}

func (s *schedstatSource) perCPU() ([]Hist, error) {
	cur := map[string]taskDelay{}
	var out []Hist
	for _, t := range Tasks(s.root) {
		td, cpu, err := readTaskDelay(t)
		if err != nil {
			continue // the task exited
		}
		cur[t.key()] = td
		old, ok := s.prev[t.key()]
		if !ok || td.slices <= old.slices || td.delay < old.delay {
			continue
		}
		for len(out) <= cpu {
			out = append(out, Hist{})
		}
		n := td.slices - old.slices
		out[cpu].Record((td.delay-old.delay)/n, n)
	}
	if s.prev == nil {
		s.prev = cur
		return nil, fmt.Errorf("schedstat: first read is the baseline")
	}
	s.prev = cur
	return out, nil
}

// readTaskDelay reads a task's run_delay and timeslice count and the CPU it
// last ran on.
func readTaskDelay(t Task) (taskDelay, int, error) {
	ss, err := t.Proc.Schedstat()
	if err != nil {
		return taskDelay{}, 0, err
	}
	st, err := t.Proc.Stat()
	if err != nil {
		return taskDelay{}, 0, err
	}
	return taskDelay{delay: ss.WaitingNanoseconds, slices: ss.RunTimeslices}, int(st.Processor), nil
}

// byClass sums per-CPU histograms into Node, Isolated and Reserved.
func byClass(perCPU []Hist, c cpuClasses) map[string]*Hist {
	out := map[string]*Hist{ClassNode: {}}
	if !c.isolated.IsEmpty() {
		out[ClassIsolated] = &Hist{}
	}
	if !c.reserved.IsEmpty() {
		out[ClassReserved] = &Hist{}
	}
	for cpu := range perCPU {
		out[ClassNode].Add(&perCPU[cpu])
		if c.isolated.Contains(cpu) {
			out[ClassIsolated].Add(&perCPU[cpu])
		}
		if c.reserved.Contains(cpu) {
			out[ClassReserved].Add(&perCPU[cpu])
		}
	}
	return out
}

// classOrder is the order of classes in status.
var classOrder = []string{ClassNode, ClassIsolated, ClassReserved}

func classLatencies(hs map[string]*Hist) []v1alpha1.ClassLatency {
	var out []v1alpha1.ClassLatency
	for _, c := range classOrder {
		if h, ok := hs[c]; ok {
			out = append(out, classLatency(c, h))
		}
	}
	return out
}
