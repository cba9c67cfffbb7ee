// Package bpf owns the run-queue latency BPF program (runqlat.bpf.c, compiled
// by hack/generate-bpf.sh into runqlat_bpfel.o and its bpf2go loader): it
// loads it, attaches it to sched_wakeup, sched_wakeup_new and sched_switch
// (tp_btf where the kernel has BPF tracing programs, raw_tp otherwise) and
// reads the per-CPU log-linear histograms and, with attribution (on unless
// WithoutAttribution), the measured pods' waits split by what ran on their
// CPU meanwhile (attribution.go). It knows nothing about CPU classes,
// percentiles or pods; package measure does.
package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Histogram layout, mirrored from runqlat.bpf.c.
const (
	// SubBits is log2 of the sub-buckets per power of two.
	SubBits = 3
	// MaxExp is the largest power of two (in units) with its own buckets.
	MaxExp = 33
	// Slots is the number of buckets.
	Slots = (MaxExp - SubBits + 2) << SubBits
	// UnitNumer/UnitDenom is the histogram unit in ns: 1/16 us = 125/2 ns.
	UnitNumer, UnitDenom = 125, 2
)

// Attach types the tracer may use.
const (
	AttachTPBTF = "tp_btf"
	AttachRawTP = "raw_tp"
)

// CPUHist is one CPU's cumulative histogram (Slots) and the largest latency
// since the last ReadAndResetMax.
type CPUHist struct {
	Slots [Slots]uint64
	MaxNs uint64
}

// MaxPodCgroups is how many cgroup IDs SetPodCgroups takes (the
// pod_cgroups map's size).
const MaxPodCgroups = 4096

// PodSlots is how many per-pod histograms the program keeps (POD_SLOTS in
// runqlat.bpf.c); OtherSlot, the last, is shared by every pod past the
// first PodSlots-1, so their own figures are not known.
const (
	PodSlots  = 256
	OtherSlot = PodSlots - 1
)

// Tracer is the loaded and attached program.
type Tracer struct {
	attach string
	node   class
	pods   class
	start  *ebpf.Map
	podIDs *ebpf.Map
	podsOn *ebpf.Map
	// slotHists are the per-pod histograms (pod_slot_hists).
	slotHists *ebpf.Map
	progs     []*ebpf.Program
	links     []link.Link
	// tracked are the IDs now in pod_cgroups, with their values.
	tracked map[uint64]runqlatPodCg
	// attribution says the attribution code is loaded (attr and others
	// are unused otherwise).
	attribution bool
	attr        *ebpf.Map
	others      *ebpf.Map
	gen         *ebpf.Map
	curGen      uint32
	kernelOnly  []*ebpf.Map // loaded maps only the kernel uses, for Close
}

// class is one histogram and its max: every task (node) or the measured
// pods' tasks.
type class struct{ hists, maxes *ebpf.Map }

type objects struct {
	Wakeup     *ebpf.Program `ebpf:"wakeup"`
	WakeupNew  *ebpf.Program `ebpf:"wakeup_new"`
	Switch     *ebpf.Program `ebpf:"switch"`
	Hists      *ebpf.Map     `ebpf:"hists"`
	Maxes      *ebpf.Map     `ebpf:"maxes"`
	Start      *ebpf.Map     `ebpf:"start"`
	PodCgroups *ebpf.Map     `ebpf:"pod_cgroups"`
	PodsOn     *ebpf.Map     `ebpf:"pods_on"`
	PodHists   *ebpf.Map     `ebpf:"pod_hists"`
	PodMaxes   *ebpf.Map     `ebpf:"pod_maxes"`
	SlotHists  *ebpf.Map     `ebpf:"pod_slot_hists"`
	Attr       *ebpf.Map     `ebpf:"attr"`
	Others     *ebpf.Map     `ebpf:"others"`
	Gen        *ebpf.Map     `ebpf:"gen"`
	Waiting    *ebpf.Map     `ebpf:"waiting"`
	CPUStates  *ebpf.Map     `ebpf:"cpu_states"`
}

// Option changes how the program is loaded.
type Option func(*options)

type options struct{ attribution bool }

// WithoutAttribution loads the program with attribution compiled out by the
// verifier (the "without" side of the cost benchmark).
func WithoutAttribution() Option { return func(o *options) { o.attribution = false } }

func optionsOf(opts []Option) options {
	o := options{attribution: true}
	for _, f := range opts {
		f(&o)
	}
	return o
}

var tracepoints = []string{"sched_wakeup", "sched_wakeup_new", "sched_switch"}

// OpenAttach loads and attaches the program with one attach type only
// (AttachTPBTF or AttachRawTP).
func OpenAttach(attach string, opts ...Option) (*Tracer, error) {
	_ = rlimit.RemoveMemlock()
	o := optionsOf(opts)
	switch attach {
	case AttachTPBTF:
		return open(AttachTPBTF, "ltb_", o)
	case AttachRawTP:
		return open(AttachRawTP, "ltr_", o)
	}
	return nil, fmt.Errorf("unknown attach type %q", attach)
}

// Open loads and attaches the program, trying tp_btf first and raw_tp second.
func Open(opts ...Option) (*Tracer, error) {
	_ = rlimit.RemoveMemlock() // only matters before 5.11 (memcg accounting)
	o := optionsOf(opts)
	t, errBTF := open(AttachTPBTF, "ltb_", o)
	if errBTF == nil {
		return t, nil
	}
	t, errRaw := open(AttachRawTP, "ltr_", o)
	if errRaw == nil {
		return t, nil
	}
	return nil, fmt.Errorf("load run-queue latency BPF: %w", errors.Join(errBTF, errRaw))
}

func open(attach, prefix string, o options) (*Tracer, error) {
	spec, err := loadRunqlat()
	if err != nil {
		return nil, err
	}
	on := uint32(0)
	if o.attribution {
		on = 1
	}
	v, ok := spec.Variables["attribution"]
	if !ok {
		return nil, errors.New("BPF object has no attribution switch")
	}
	if err := v.Set(on); err != nil {
		return nil, fmt.Errorf("set attribution: %w", err)
	}
	keep := map[string]string{prefix + "wakeup": "wakeup", prefix + "wakeup_new": "wakeup_new", prefix + "switch": "switch"}
	progs := map[string]*ebpf.ProgramSpec{}
	for name, ps := range spec.Programs {
		if short, ok := keep[name]; ok {
			progs[short] = ps
		}
	}
	spec.Programs = progs
	var objs objects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", attach, err)
	}
	t := &Tracer{attach: attach, node: class{objs.Hists, objs.Maxes}, pods: class{objs.PodHists, objs.PodMaxes},
		start: objs.Start, podIDs: objs.PodCgroups, podsOn: objs.PodsOn, slotHists: objs.SlotHists, tracked: map[uint64]runqlatPodCg{},
		progs:       []*ebpf.Program{objs.Wakeup, objs.WakeupNew, objs.Switch},
		attribution: o.attribution, attr: objs.Attr, others: objs.Others, gen: objs.Gen,
		kernelOnly: []*ebpf.Map{objs.Waiting, objs.CPUStates}}
	for i, p := range t.progs {
		l, err := attachOne(attach, tracepoints[i], p)
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("%s attach %s: %w", attach, tracepoints[i], err)
		}
		t.links = append(t.links, l)
	}
	return t, nil
}

func attachOne(attach, tp string, p *ebpf.Program) (link.Link, error) {
	if attach == AttachTPBTF {
		return link.AttachTracing(link.TracingOptions{Program: p})
	}
	return link.AttachRawTracepoint(link.RawTracepointOptions{Name: tp, Program: p})
}

// Attach says how the program is attached (tp_btf or raw_tp).
func (t *Tracer) Attach() string { return t.attach }

// Programs returns the loaded programs (for cost accounting in benchmarks).
func (t *Tracer) Programs() []*ebpf.Program { return t.progs }

// Read returns every possible CPU's cumulative histogram of every task and
// the largest latency since the previous Read, which it resets.
func (t *Tracer) Read() ([]CPUHist, error) { return t.node.read() }

// ReadPods is Read for the tasks of the cgroups given to SetPodCgroups.
func (t *Tracer) ReadPods() ([]CPUHist, error) { return t.pods.read() }

// PodCgroup is a measured cgroup: ID is the inode number of a pod's or
// container's cgroup directory in the cpu controller; Limited says the pod
// has a CFS quota, so attribution reads its tasks' throttle state (a wait
// that begins throttled is self-throttling); Slot is the pod's own
// histogram (ReadPodSlots), the same for all of a pod's cgroups, below
// PodSlots (OtherSlot for pods past the others).
type PodCgroup struct {
	ID      uint64
	Limited bool
	Slot    uint32
}

// Flags in pod_cgroups' values, mirrored from runqlat.bpf.c.
const (
	pcMeasured uint32 = 1
	pcLimited  uint32 = 2
)

// ReadPodSlots returns the cumulative histograms of the given slots (each
// below PodSlots), in their order. MaxNs is not kept per pod (0).
func (t *Tracer) ReadPodSlots(slots []uint32) ([]CPUHist, error) {
	out := make([]CPUHist, len(slots))
	var h runqlatHist
	for i, s := range slots {
		if s >= PodSlots {
			return nil, fmt.Errorf("pod histogram slot %d, at most %d", s, PodSlots-1)
		}
		if err := t.slotHists.Lookup(s, &h); err != nil {
			return nil, fmt.Errorf("read pod histogram %d: %w", s, err)
		}
		out[i].Slots = h.Slots
	}
	return out, nil
}

// SetPodCgroups makes cgs the measured set, replacing the previous one. At
// most MaxPodCgroups.
func (t *Tracer) SetPodCgroups(cgs []PodCgroup) error {
	if len(cgs) > MaxPodCgroups {
		return fmt.Errorf("%d pod cgroups, at most %d", len(cgs), MaxPodCgroups)
	}
	want := make(map[uint64]runqlatPodCg, len(cgs))
	for _, c := range cgs {
		if c.Slot >= PodSlots {
			return fmt.Errorf("cgroup %d: pod histogram slot %d, at most %d", c.ID, c.Slot, PodSlots-1)
		}
		v := want[c.ID]
		v.Flags |= pcMeasured
		if c.Limited {
			v.Flags |= pcLimited
		}
		v.Slot = c.Slot
		want[c.ID] = v
	}
	var errs []error
	for id := range t.tracked {
		if _, ok := want[id]; !ok {
			if err := t.podIDs.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, err)
				continue
			}
			delete(t.tracked, id)
		}
	}
	for id, v := range want {
		if cur, ok := t.tracked[id]; !ok || cur != v {
			if err := t.podIDs.Put(id, v); err != nil {
				errs = append(errs, err)
				continue
			}
			t.tracked[id] = v
		}
	}
	on := uint32(0)
	if len(t.tracked) > 0 {
		on = 1
	}
	errs = append(errs, t.podsOn.Put(uint32(0), on))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("set pod cgroups: %w", err)
	}
	return nil
}

func (c class) read() ([]CPUHist, error) {
	var hs []runqlatHist
	if err := c.hists.Lookup(uint32(0), &hs); err != nil {
		return nil, fmt.Errorf("read histogram map: %w", err)
	}
	var maxes []uint64
	if err := c.maxes.Lookup(uint32(0), &maxes); err != nil {
		return nil, fmt.Errorf("read max map: %w", err)
	}
	if err := c.maxes.Update(uint32(0), make([]uint64, len(maxes)), ebpf.UpdateExist); err != nil {
		return nil, fmt.Errorf("reset max map: %w", err)
	}
	out := make([]CPUHist, len(hs))
	for i := range hs {
		out[i].Slots = hs[i].Slots
		if i < len(maxes) {
			out[i].MaxNs = maxes[i]
		}
	}
	return out, nil
}

// Close detaches and unloads everything.
func (t *Tracer) Close() error {
	var errs []error
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	for _, p := range t.progs {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	maps := append([]*ebpf.Map{t.node.hists, t.node.maxes, t.pods.hists, t.pods.maxes, t.start, t.podIDs, t.podsOn,
		t.slotHists, t.attr, t.others, t.gen}, t.kernelOnly...)
	for _, m := range maps {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}
