package bpf

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
)

// Kind is what ran on a CPU while a measured task waited there (the OFF_*
// classes of runqlat.bpf.c). Which pod or service a KindTask cgroup is,
// user space decides.
type Kind uint32

// Kinds, as in runqlat.bpf.c.
const (
	// KindUnknown is wait the program could not split: older than its
	// per-CPU ring of runner intervals, or queued on another CPU first.
	KindUnknown Kind = 0
	// KindTask is a user task, identified by its cpu cgroup ID.
	KindTask Kind = 1
	// KindKernelThread is a PF_KTHREAD task, identified by its comm.
	KindKernelThread Kind = 2
	// KindIdle is the idle task: the CPU was idle (wake-up and idle-exit
	// latency).
	KindIdle Kind = 3
	// KindThrottled is a wait that began while the task's own CFS
	// bandwidth group (or one above it) was throttled.
	KindThrottled Kind = 4
)

// AttrEntries is the size of the (victim, offender) map; charges that do
// not fit go to the victim's OtherNs.
const AttrEntries = 8192

// Offender is one thing a measured task waited behind. Comm is raw kernel
// bytes (a tenant may choose them): escape before showing it.
type Offender struct {
	Kind     Kind
	CgroupID uint64 // KindTask
	Comm     string // KindKernelThread
}

// Charge is wait of a measured cgroup's tasks charged to one offender.
type Charge struct {
	Victim   uint64 // the waiting task's cpu cgroup ID
	Offender Offender
	Ns       uint64
}

// VictimWait is one measured cgroup's total wait in the window: the sum of
// its Charges plus OtherNs, the wait whose charge found the map full.
type VictimWait struct {
	Victim  uint64
	WaitNs  uint64
	Waits   uint64
	OtherNs uint64
}

// Attribution is what ReadAttribution returns: the window's charges and
// the totals per measured cgroup.
type Attribution struct {
	Charges []Charge
	Victims []VictimWait
}

// ErrNoAttribution is returned by ReadAttribution on a tracer opened
// WithoutAttribution.
var ErrNoAttribution = errors.New("BPF program loaded without attribution")

// inFlight is how long ReadAttribution waits after flipping the generation
// for programs that read the old one to finish: they run for microseconds
// with preemption off.
const inFlight = 2 * time.Millisecond

// ReadAttribution returns what accumulated since the previous call and
// deletes it from the maps. It flips the generation the program charges
// to and reads the old one, so a wait and all its charges are in the same
// window.
func (t *Tracer) ReadAttribution() (*Attribution, error) {
	if !t.attribution {
		return nil, ErrNoAttribution
	}
	old := t.curGen
	if err := t.gen.Put(uint32(0), old^1); err != nil {
		return nil, fmt.Errorf("flip attribution generation: %w", err)
	}
	t.curGen = old ^ 1
	time.Sleep(inFlight)
	out := &Attribution{}
	totals := map[uint64]*VictimWait{}
	total := func(cg uint64) *VictimWait {
		v := totals[cg]
		if v == nil {
			v = &VictimWait{Victim: cg}
			totals[cg] = v
		}
		return v
	}
	var errs []error
	var ak runqlatAttrKey
	var perCPU []runqlatCharged
	var keys []runqlatAttrKey
	it := t.attr.Iterate()
	for it.Next(&ak, &perCPU) {
		if ak.Gen != old {
			continue
		}
		keys = append(keys, ak)
		var c runqlatCharged
		for _, p := range perCPU {
			c.Ns += p.Ns
			c.Waits += p.Waits
		}
		out.Charges = append(out.Charges, Charge{Victim: ak.Victim, Ns: c.Ns, Offender: Offender{
			Kind: Kind(ak.Off.Class), CgroupID: ak.Off.Id, Comm: commString(ak.Off.Comm)}})
		v := total(ak.Victim)
		v.WaitNs += c.Ns
		v.Waits += c.Waits
	}
	errs = append(errs, it.Err())
	for i := range keys {
		if err := t.attr.Delete(&keys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	var vk runqlatVictimKey
	var c runqlatCharged
	var vkeys []runqlatVictimKey
	vit := t.others.Iterate()
	for vit.Next(&vk, &c) {
		if vk.Gen != old {
			continue
		}
		vkeys = append(vkeys, vk)
		v := total(vk.Cg)
		v.WaitNs += c.Ns
		v.Waits += c.Waits
		v.OtherNs += c.Ns
	}
	errs = append(errs, vit.Err())
	for i := range vkeys {
		if err := t.others.Delete(&vkeys[i]); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	for _, v := range totals {
		out.Victims = append(out.Victims, *v)
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("read attribution: %w", err)
	}
	return out, nil
}

// Attribution says the attribution code is loaded.
func (t *Tracer) Attribution() bool { return t.attribution }

func commString(c [16]int8) string {
	b := make([]byte, 0, len(c))
	for _, ch := range c {
		if ch == 0 {
			break
		}
		b = append(b, byte(ch))
	}
	return string(b)
}
