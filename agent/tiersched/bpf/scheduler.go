// Package bpf holds latencytier's tier scheduler, a sched_ext BPF program
// (tier.bpf.c, compiled by hack/generate-bpf.sh into the committed
// tier_bpfel.o), and loads it with cilium/ebpf's struct_ops support: load,
// attach, pin, open the pins again, detach. It decides nothing: whether the
// scheduler may be loaded on a node, and what to do when the kernel ejects
// it, is agent/tiersched's.
package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// OpsName is the scheduler's sched_ext ops name, as
// /sys/kernel/sched_ext/root/ops shows it.
const OpsName = "latencytier"

// StructOps is the kernel struct the scheduler implements; its presence in
// the kernel's BTF (as bpf_struct_ops_sched_ext_ops) says sched_ext is
// built in.
const StructOps = "sched_ext_ops"

// Kfuncs are the kernel functions the program calls. Each must exist with
// the prototype sched_ext.h declares, and one of InsertKfuncs: the program
// is built once per insert kfunc (6.19 renamed it) and Load picks the
// object whose insert the kernel has, the first in this order.
var (
	Kfuncs       = []string{"scx_bpf_select_cpu_dfl", "scx_bpf_task_cpu"}
	InsertKfuncs = []string{"scx_bpf_dsq_insert___v2", "scx_bpf_dsq_insert"}
)

// objects are the built objects by the insert kfunc they call.
var objects = map[string]func() (*ebpf.CollectionSpec, error){
	"scx_bpf_dsq_insert___v2": loadTierV2,
	"scx_bpf_dsq_insert":      loadTier,
}

// InsertKfunc is the insert kfunc the kernel whose BTF is kernel has, ""
// when none (a kernel older than 6.13).
func InsertKfunc(kernel *btf.Spec) string {
	for _, name := range InsertKfuncs {
		if Has(kernel, name) {
			return name
		}
	}
	return ""
}

// Has says whether the BTF spec has a type named exactly name. Not
// AnyTypeByName: in cilium/ebpf v0.22.0 it panics when every candidate of
// the essential name (the name without its ___suffix) has another full
// name, and AnyTypesByName can leave a candidate of another full name in
// (its filter skips the element after each one it deletes), so the names
// are compared here.
func Has(spec *btf.Spec, name string) bool {
	types, err := spec.AnyTypesByName(name)
	if err != nil {
		return false
	}
	for _, t := range types {
		if t.TypeName() == name {
			return true
		}
	}
	return false
}

// MaxTimeout is the kernel's longest stall watchdog timeout
// (SCX_WATCHDOG_MAX_TIMEOUT, 30 s); a Timeout of 0 means it.
const MaxTimeout = 30 * time.Second

// Options are the scheduler's tunables, fixed at load time.
type Options struct {
	// TierSlice is a granted task's slice (1 ms when 0).
	TierSlice time.Duration
	// FairSlice is everyone else's slice (5 ms when 0).
	FairSlice time.Duration
	// BudgetPct is the share of each CPU, per 100 ms window, granted tasks
	// may take before they queue with everyone else (90 when 0; 1 to 100).
	BudgetPct uint32
	// Timeout is the kernel's stall watchdog timeout (MaxTimeout when 0).
	Timeout time.Duration

	// testControls arms the test-only stall control; only the test build
	// (testcontrols_privileged.go) sets it.
	testControls bool
}

func (o Options) withDefaults() Options {
	if o.TierSlice == 0 {
		o.TierSlice = time.Millisecond
	}
	if o.FairSlice == 0 {
		o.FairSlice = 5 * time.Millisecond
	}
	if o.BudgetPct == 0 {
		o.BudgetPct = 90
	}
	return o
}

// Validate names the first tunable out of range.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.TierSlice < 50*time.Microsecond || o.TierSlice > 100*time.Millisecond:
		return fmt.Errorf("tier slice %s: want 50µs to 100ms", o.TierSlice)
	case o.FairSlice < 50*time.Microsecond || o.FairSlice > 100*time.Millisecond:
		return fmt.Errorf("fair slice %s: want 50µs to 100ms", o.FairSlice)
	case o.BudgetPct > 100:
		return fmt.Errorf("tier budget %d%%: want 1 to 100", o.BudgetPct)
	case o.Timeout < 0 || o.Timeout > MaxTimeout || o.Timeout%time.Millisecond != 0:
		return fmt.Errorf("watchdog timeout %s: want whole milliseconds up to %s", o.Timeout, MaxTimeout)
	}
	return nil
}

// Spec is the scheduler's collection calling the insert kfunc named (one of
// InsertKfuncs), with o applied: the read-only tunables and the struct_ops
// data's timeout_ms.
func Spec(o Options, insert string) (*ebpf.CollectionSpec, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	load, ok := objects[insert]
	if !ok {
		return nil, fmt.Errorf("no tier scheduler object calls %q", insert)
	}
	spec, err := load()
	if err != nil {
		return nil, err
	}
	set := map[string]any{
		"tier_slice_ns":   uint64(o.TierSlice.Nanoseconds()),
		"fair_slice_ns":   uint64(o.FairSlice.Nanoseconds()),
		"tier_budget_pct": o.BudgetPct,
		"test_controls":   o.testControls,
	}
	for name, v := range set {
		vs, ok := spec.Variables[name]
		if !ok {
			return nil, fmt.Errorf("tier scheduler object has no variable %s", name)
		}
		if err := vs.Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	if err := setOpsMember(spec, "timeout_ms", uint32(o.Timeout.Milliseconds())); err != nil {
		return nil, err
	}
	return spec, nil
}

// setOpsMember writes a u32 member of the struct_ops data before load
// (cilium/ebpf copies the data into the kernel's layout by member name).
func setOpsMember(spec *ebpf.CollectionSpec, member string, v uint32) error {
	ms, ok := spec.Maps["tier_ops"]
	if !ok || len(ms.Contents) != 1 {
		return errors.New("tier scheduler object has no struct_ops data tier_ops")
	}
	st, ok := ms.Value.(*btf.Struct)
	if !ok {
		return fmt.Errorf("tier_ops value is %T, not a struct", ms.Value)
	}
	data, ok := ms.Contents[0].Value.([]byte)
	if !ok {
		return fmt.Errorf("tier_ops data is %T, not bytes", ms.Contents[0].Value)
	}
	for _, m := range st.Members {
		if m.Name != member {
			continue
		}
		off := int(m.Offset.Bytes())
		if off+4 > len(data) {
			return fmt.Errorf("tier_ops.%s lies outside its data", member)
		}
		out := append([]byte(nil), data...)
		putU32(out[off:], v)
		ms.Contents[0].Value = out
		return nil
	}
	return fmt.Errorf("tier_ops has no member %s", member)
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24) // bpfel
}

// The pins under a scheduler's pin directory.
const (
	pinLink    = "link"
	pinCgroups = "granted_cgroups"
	pinTgids   = "granted_tgids"
	pinStats   = "stats"
	pinExit    = "exit_info"
	pinStall   = "stall_tgid"
)

var pinnedMaps = []string{pinCgroups, pinTgids, pinStats, pinExit, pinStall}

// Scheduler is a loaded (and maybe attached) instance.
type Scheduler struct {
	coll *ebpf.Collection
	lnk  link.Link
}

// Load loads the programs and maps into the kernel without attaching.
// Errors from the kernel or the kfunc linker are returned as they are
// (errors.Is ebpf.ErrNotSupported: a kfunc or sched_ext is missing).
func Load(o Options) (*Scheduler, error) {
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("read the kernel's BTF: %w", err)
	}
	insert := InsertKfunc(kernel)
	if insert == "" {
		return nil, fmt.Errorf("the kernel has neither %s: %w", strings.Join(InsertKfuncs, " nor "), ebpf.ErrNotSupported)
	}
	spec, err := Spec(o, insert)
	if err != nil {
		return nil, err
	}
	_ = rlimit.RemoveMemlock() // only matters before 5.11 (memcg accounting)
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("load the tier scheduler: %w", err)
	}
	return &Scheduler{coll: coll}, nil
}

// Attach registers the scheduler with the kernel: from here on the kernel
// runs every normal task through it. The kernel may report success and
// still have disabled it (an error in its enable path); the caller checks
// /sys/kernel/sched_ext afterwards.
func (s *Scheduler) Attach() error {
	l, err := link.AttachStructOps(link.StructOpsOptions{Map: s.coll.Maps["tier_ops"]})
	if err != nil {
		return err
	}
	s.lnk = l
	return nil
}

// Pin pins the link and the maps user space reads or fills into dir (a
// directory on a bpffs), so the scheduler outlives this process.
func (s *Scheduler) Pin(dir string) error {
	if s.lnk == nil {
		return errors.New("pin: not attached")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, name := range pinnedMaps {
		if err := s.coll.Maps[name].Pin(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("pin %s: %w", name, err)
		}
	}
	if err := s.lnk.Pin(filepath.Join(dir, pinLink)); err != nil {
		return fmt.Errorf("pin link: %w", err)
	}
	return nil
}

// Close closes this process's handles; a pinned scheduler stays attached.
func (s *Scheduler) Close() error {
	var errs []error
	if s.lnk != nil {
		errs = append(errs, s.lnk.Close())
	}
	s.coll.Close()
	return errors.Join(errs...)
}

// Detach detaches an attached, unpinned scheduler (a load whose checks
// failed) and closes it.
func (s *Scheduler) Detach() error {
	if s.lnk != nil {
		_ = detach(s.lnk)
	}
	return s.Close()
}

// Maps is this instance's maps.
func (s *Scheduler) Maps() *Maps {
	m := s.coll.Maps
	return &Maps{cgroups: m[pinCgroups], tgids: m[pinTgids], stats: m[pinStats], exit: m[pinExit], stall: m[pinStall]}
}

// Pinned says whether dir holds a pinned scheduler link.
func Pinned(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, pinLink))
	return err == nil
}

// OpenMaps opens the maps pinned in dir.
func OpenMaps(dir string) (*Maps, error) {
	var open []*ebpf.Map
	get := func(name string) *ebpf.Map {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if err != nil {
			return nil
		}
		open = append(open, m)
		return m
	}
	m := &Maps{cgroups: get(pinCgroups), tgids: get(pinTgids), stats: get(pinStats), exit: get(pinExit), stall: get(pinStall)}
	if len(open) != len(pinnedMaps) {
		for _, o := range open {
			o.Close()
		}
		return nil, fmt.Errorf("%s does not hold the tier scheduler's maps", dir)
	}
	m.owned = open
	return m, nil
}

// Unpin detaches the scheduler pinned in dir, removes its pins and the
// directory. Nothing pinned is no error. Detaching makes the kernel disable
// the scheduler synchronously (bpf_scx_unreg); on kernels without link
// detach for struct_ops the last reference, dropped here, does the same.
func Unpin(dir string) error {
	var errs []error
	if Pinned(dir) {
		l, err := link.LoadPinnedLink(filepath.Join(dir, pinLink), nil)
		if err != nil {
			return fmt.Errorf("open the pinned link: %w", err)
		}
		errs = append(errs, l.Unpin(), detach(l), l.Close())
	}
	for _, name := range pinnedMaps {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func detach(l link.Link) error {
	d, ok := l.(interface{ Detach() error })
	if !ok {
		return nil
	}
	if err := d.Detach(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
		return err
	}
	return nil
}

// Maps are the maps user space fills and reads.
type Maps struct {
	cgroups, tgids, stats, exit, stall *ebpf.Map
	owned                              []*ebpf.Map
}

// Close closes maps opened from pins.
func (m *Maps) Close() {
	for _, o := range m.owned {
		o.Close()
	}
}

// SetGranted makes the granted sets exactly cgroups and tgids.
func (m *Maps) SetGranted(cgroups []uint64, tgids []uint32) error {
	return errors.Join(syncSet(m.cgroups, cgroups), syncSet(m.tgids, tgids))
}

func syncSet[K uint64 | uint32](mp *ebpf.Map, want []K) error {
	keep := make(map[K]bool, len(want))
	for _, k := range want {
		keep[k] = true
	}
	var stale []K
	var k K
	var v uint8
	for it := mp.Iterate(); it.Next(&k, &v); {
		if !keep[k] {
			stale = append(stale, k)
		}
		delete(keep, k)
	}
	var errs []error
	for _, k := range stale {
		if err := mp.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	for k := range keep {
		if err := mp.Put(k, uint8(1)); err != nil {
			errs = append(errs, fmt.Errorf("grant %d: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// Counters are the scheduler's decisions since it was loaded, summed over
// CPUs (tier.bpf.c enum tier_stat).
type Counters struct {
	// Tier counts granted tasks put on a CPU's local queue, TierPreempt
	// those that preempted an ordinary task, TierDemoted granted tasks
	// queued with everyone else because their CPU's budget was spent.
	Tier, TierPreempt, TierDemoted uint64
	// Fair counts everyone else's insertions into the shared queue.
	Fair uint64
	// Kthread counts per-CPU kernel threads put on their CPU's queue.
	Kthread uint64
	// Idle counts tasks put straight onto an idle CPU at wake-up.
	Idle uint64
	// Stalled counts tasks the test control dropped.
	Stalled uint64
}

// Counters reads the counters.
func (m *Maps) Counters() (Counters, error) {
	var out Counters
	fields := []*uint64{&out.Tier, &out.TierPreempt, &out.TierDemoted, &out.Fair, &out.Kthread, &out.Idle, &out.Stalled}
	for i, f := range fields {
		var per []uint64
		if err := m.stats.Lookup(uint32(i), &per); err != nil {
			return out, fmt.Errorf("read counter %d: %w", i, err)
		}
		for _, v := range per {
			*f += v
		}
	}
	return out, nil
}

// Exit is what the kernel told the scheduler when it disabled it
// (struct scx_exit_info); Kind 0 means it has not exited.
type Exit struct {
	Kind     int32
	ExitCode int64
	Reason   string
	Msg      string
}

type exitRec struct {
	Kind     int32
	_        uint32
	ExitCode int64
	Reason   [128]byte
	Msg      [1024]byte
}

// Exit reads the exit record.
func (m *Maps) Exit() (Exit, error) {
	var r exitRec
	if err := m.exit.Lookup(uint32(0), &r); err != nil {
		return Exit{}, fmt.Errorf("read exit_info: %w", err)
	}
	return Exit{Kind: r.Kind, ExitCode: r.ExitCode, Reason: cstr(r.Reason[:]), Msg: cstr(r.Msg[:])}, nil
}

func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
