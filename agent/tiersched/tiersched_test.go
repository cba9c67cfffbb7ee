package tiersched

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf/btf"
	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/schedext"
	tbpf "latencytier.io/latencytier/agent/tiersched/bpf"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// fixture is a temp-dir host root laid out as the kernel lays it out.
type fixture struct {
	t    *testing.T
	root *host.Root
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, root: host.New(t.TempDir())}
	f.write("proc/sys/kernel/osrelease", "7.3.4+deb13-amd64\n")
	f.write("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/vda ro quiet\n")
	return f
}

func (f *fixture) write(rel, content string) {
	f.t.Helper()
	p := f.root.Path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// schedExt writes /sys/kernel/sched_ext in the kernel's formats; ops ""
// means no root/ directory (nothing attached).
func (f *fixture) schedExt(state string, seq int, ops string) {
	f.write("sys/kernel/sched_ext/state", state+"\n")
	sw := "0"
	if ops != "" && state == schedext.StateEnabled {
		sw = "1"
	}
	f.write("sys/kernel/sched_ext/switch_all", sw+"\n")
	f.write("sys/kernel/sched_ext/enable_seq", itoa(seq)+"\n")
	f.write("sys/kernel/sched_ext/nr_rejected", "0\n")
	if ops != "" {
		f.write("sys/kernel/sched_ext/root/ops", ops+"\n")
	} else {
		_ = os.RemoveAll(f.root.Sys("kernel", "sched_ext", "root"))
	}
}

// kernelBTF writes a vmlinux BTF holding the named functions and types.
func (f *fixture) kernelBTF(funcs ...string) {
	f.t.Helper()
	b, err := btf.NewBuilder(nil, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, name := range funcs {
		var typ btf.Type = &btf.Func{Name: name, Type: &btf.FuncProto{Return: (*btf.Void)(nil)}, Linkage: btf.GlobalFunc}
		if strings.HasPrefix(name, "bpf_struct_ops_") {
			typ = &btf.Struct{Name: name}
		}
		if _, err := b.Add(typ); err != nil {
			f.t.Fatal(err)
		}
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.write("sys/kernel/btf/vmlinux", string(raw))
}

var kernel613 = []string{"bpf_struct_ops_sched_ext_ops", "scx_bpf_select_cpu_dfl", "scx_bpf_task_cpu", "scx_bpf_dsq_insert"}

func itoa(n int) string { return strconv.Itoa(n) }

// A sched_ext kernel the scheduler can load on, but for the bpffs, which
// a temp dir is not; tests set it.
func (f *fixture) readyNode() Node {
	f.schedExt(schedext.StateDisabled, 0, "")
	f.kernelBTF(kernel613...)
	n := ReadNode(f.root)
	n.BPFFS = true
	return n
}

func TestPreflight(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *fixture, n *Node)
		class kerr.Class // "" = loadable
		want  string
	}{
		{"loadable", func(*fixture, *Node) {}, "", ""},
		{"no sched_ext", func(f *fixture, n *Node) {
			_ = os.RemoveAll(f.root.Sys("kernel", "sched_ext"))
			*n = ReadNode(f.root)
		}, kerr.Unsupported, "sched_ext is not built into this kernel (Linux 7.3.4+deb13-amd64; no /sys/kernel/sched_ext)"},
		{"no BTF", func(f *fixture, n *Node) {
			_ = os.Remove(f.root.Sys("kernel", "btf", "vmlinux"))
			*n = ReadNode(f.root)
		}, kerr.Unsupported, "no BTF (/sys/kernel/btf/vmlinux missing"},
		{"unreadable BTF", func(f *fixture, n *Node) {
			f.write("sys/kernel/btf/vmlinux", "not btf")
			*n = ReadNode(f.root)
		}, kerr.Unsupported, "the kernel's BTF"},
		{"another scheduler", func(f *fixture, n *Node) {
			f.schedExt(schedext.StateEnabled, 4, "scx_lavd")
			*n = ReadNode(f.root)
			n.BPFFS = true
		}, kerr.Conflict, "another sched_ext scheduler is loaded (ext:scx_lavd); latencytier never unloads"},
		{"a scheduler named like ours, not pinned by us", func(f *fixture, n *Node) {
			f.schedExt(schedext.StateEnabled, 4, tbpf.OpsName)
			*n = ReadNode(f.root)
			n.BPFFS = true
		}, kerr.Conflict, "another sched_ext scheduler is loaded (ext:latencytier)"},
		{"isolcpus without flags isolates domains", func(f *fixture, n *Node) {
			n.Cmdline = "ro isolcpus=2-3"
		}, kerr.Unsupported, "isolates scheduler domains (isolcpus=2-3)"},
		{"isolcpus=domain", func(f *fixture, n *Node) {
			n.Cmdline = "isolcpus=domain,managed_irq,2-3"
		}, kerr.Unsupported, "isolcpus=domain,managed_irq,2-3"},
		{"isolcpus=managed_irq alone is fine", func(f *fixture, n *Node) {
			n.Cmdline = "isolcpus=managed_irq,2-3 nohz_full=2-3"
		}, "", ""},
		{"isolcpus=nohz alone is fine", func(f *fixture, n *Node) {
			n.Cmdline = "isolcpus=nohz,2-3"
		}, "", ""},
		{"isolcpus after -- belongs to init", func(f *fixture, n *Node) {
			n.Cmdline = "ro -- isolcpus=2-3"
		}, "", ""},
		{"7.0 with an isolated partition", func(f *fixture, n *Node) {
			n.Release, n.IsolatedPartitions = "7.0.9+deb13-amd64", "2-3"
		}, kerr.Unsupported, "Linux 7.0.9+deb13-amd64 refuses sched_ext while an isolated cpuset partition exists (CPUs 2-3"},
		{"7.1 with an isolated partition is fine", func(f *fixture, n *Node) {
			n.Release, n.IsolatedPartitions = "7.1.2", "2-3"
		}, "", ""},
		{"7.0 without partitions is fine", func(f *fixture, n *Node) {
			n.Release = "7.0.9"
		}, "", ""},
		{"6.12: no dsq_insert", func(f *fixture, n *Node) {
			f.kernelBTF("bpf_struct_ops_sched_ext_ops", "scx_bpf_select_cpu_dfl", "scx_bpf_task_cpu", "scx_bpf_dispatch")
			*n = ReadNode(f.root)
			n.BPFFS = true
		}, kerr.Unsupported, "lacks what the tier scheduler calls: scx_bpf_dsq_insert___v2 or scx_bpf_dsq_insert (it needs Linux 6.13+)"},
		{"6.19+: only the v2 insert", func(f *fixture, n *Node) {
			f.kernelBTF("bpf_struct_ops_sched_ext_ops", "scx_bpf_select_cpu_dfl", "scx_bpf_task_cpu", "scx_bpf_dsq_insert___v2")
			*n = ReadNode(f.root)
			n.BPFFS = true
		}, "", ""},
		{"no struct_ops type", func(f *fixture, n *Node) {
			f.kernelBTF("scx_bpf_select_cpu_dfl", "scx_bpf_task_cpu", "scx_bpf_dsq_insert")
			*n = ReadNode(f.root)
			n.BPFFS = true
		}, kerr.Unsupported, "struct sched_ext_ops"},
		{"no host bpffs", func(f *fixture, n *Node) {
			n.BPFFS = false
		}, kerr.Unsupported, "no bpffs at " + "ROOT/sys/fs/bpf: the scheduler is pinned there so it outlives the agent's process"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			n := f.readyNode()
			tt.setup(f, &n)
			r := Preflight(n)
			if tt.class == "" {
				if r != nil {
					t.Fatalf("refused: %v", r)
				}
				return
			}
			if r == nil {
				t.Fatal("loadable, want a refusal")
			}
			want := strings.ReplaceAll(tt.want, "ROOT", f.root.Dir())
			if r.Class != tt.class || !strings.Contains(r.Reason, want) {
				t.Errorf("refusal %s %q, want %s containing %q", r.Class, r.Reason, tt.class, want)
			}
		})
	}
}

// On a kernel without sched_ext the knob reads fair, and asking for the
// tier is refused Unsupported with the reason; nothing is loaded or pinned.
func TestWriteTierWithoutSchedExt(t *testing.T) {
	f := newFixture(t)
	if v, err := Read(f.root); err != nil || v != Fair {
		t.Fatalf("Read = %q, %v; want fair", v, err)
	}
	err := Write(f.root, Tier, tbpf.Options{})
	var rf *kerr.Refused
	if !errors.As(err, &rf) || rf.Class != kerr.Unsupported || !strings.Contains(rf.Reason, "sched_ext is not built into this kernel") {
		t.Fatalf("Write(Tier) = %v, want Unsupported naming the missing sched_ext", err)
	}
	if kerr.ClassOf(kerr.Classify("write", Address, err)) != kerr.Unsupported {
		t.Error("the refusal does not classify as Unsupported")
	}
	if f.root.Exists(PinDir(f.root)) {
		t.Error("a refused load left a pin directory")
	}
}

func TestWriteRefusesAForeignScheduler(t *testing.T) {
	f := newFixture(t)
	f.schedExt(schedext.StateEnabled, 4, "scx_lavd")
	f.kernelBTF(kernel613...)
	if v, _ := Read(f.root); v != "ext:scx_lavd" {
		t.Errorf("Read = %q, want ext:scx_lavd", v)
	}
	for _, value := range []string{Tier, Fair} {
		err := Write(f.root, value, tbpf.Options{})
		var rf *kerr.Refused
		if !errors.As(err, &rf) || rf.Class != kerr.Conflict || !strings.Contains(rf.Reason, "never unloads") {
			t.Errorf("Write(%q) = %v, want Conflict leaving scx_lavd alone", value, err)
		}
	}
	// A revert restoring the foreign class that is still there is done.
	if err := Write(f.root, "ext:scx_lavd", tbpf.Options{}); err != nil {
		t.Errorf("restore of the class still held: %v", err)
	}
	if got := f.root.Sys("kernel", "sched_ext", "root", "ops"); !f.root.Exists(got) {
		t.Error("the foreign scheduler's state was touched")
	}
}

func TestReadNamesOursOnlyWhenPinned(t *testing.T) {
	f := newFixture(t)
	f.schedExt(schedext.StateEnabled, 2, tbpf.OpsName)
	if v, _ := Read(f.root); v != "ext:latencytier (not loaded by this agent)" {
		t.Errorf("unpinned: Read = %q", v)
	}
	f.write(strings.TrimPrefix(PinDir(f.root), f.root.Dir()+"/")+"/link", "")
	if v, _ := Read(f.root); v != Tier {
		t.Errorf("pinned: Read = %q, want %q", v, Tier)
	}
}

func TestWriteInvalidValue(t *testing.T) {
	f := newFixture(t)
	err := Write(f.root, "ext:scx_rusty", tbpf.Options{})
	if kerr.ClassOf(err) != kerr.Invalid || !strings.Contains(err.Error(), `want "fair" or "ext:latencytier"`) {
		t.Errorf("Write = %v, want Invalid naming both values", err)
	}
}

func TestFairOnFairIsDone(t *testing.T) {
	f := newFixture(t)
	f.schedExt(schedext.StateDisabled, 3, "")
	if err := Write(f.root, Fair, tbpf.Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestEjected(t *testing.T) {
	on := schedext.State{Supported: true, State: schedext.StateEnabled, Ops: tbpf.OpsName, SwitchAll: true}
	tests := []struct {
		pinned bool
		st     schedext.State
		want   bool
	}{
		{false, schedext.State{Supported: true, State: schedext.StateDisabled}, false},
		{true, on, false},
		{true, schedext.State{Supported: true, State: schedext.StateEnabling, Ops: tbpf.OpsName}, false},
		{true, schedext.State{Supported: true, State: schedext.StateDisabling, Ops: tbpf.OpsName}, true},
		{true, schedext.State{Supported: true, State: schedext.StateDisabled}, true},
		{true, schedext.State{Supported: true, State: schedext.StateEnabled, Ops: "scx_lavd"}, true},
	}
	for _, tt := range tests {
		if got := Ejected(tt.pinned, tt.st); got != tt.want {
			t.Errorf("Ejected(%v, %s) = %v, want %v", tt.pinned, tt.st, got, tt.want)
		}
	}
}

// An ejection recorded for a revision blocks every reload until the
// marker is cleared (a new revision or a revert), across restarts: the
// marker is a file.
func TestExitMarkerBlocksReload(t *testing.T) {
	f := newFixture(t)
	f.schedExt(schedext.StateDisabled, 5, "")
	f.write(strings.TrimPrefix(PinDir(f.root), f.root.Dir()+"/")+"/link", "")
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	ex, _ := Check(f.root, "rev-7", at) // the fake pin cannot be opened as a link: that error is expected here
	if ex == nil || ex.Revision != "rev-7" || ex.EnableSeq != 5 || !ex.At.Equal(at) {
		t.Fatalf("Check = %+v, want a marker for rev-7 at enable_seq 5", ex)
	}
	if !strings.HasPrefix(ex.Message(), "kernel ejected latencytier: gone without exit info") {
		t.Errorf("message %q", ex.Message())
	}
	got, err := ReadExit(f.root)
	if err != nil || got == nil || got.Revision != "rev-7" {
		t.Fatalf("ReadExit = %+v, %v", got, err)
	}
	err = Write(f.root, Tier, tbpf.Options{})
	if err == nil || !strings.Contains(err.Error(), "not reloaded after the kernel ejected it: kernel ejected latencytier") {
		t.Errorf("Write(Tier) over the marker = %v", err)
	}
	if err := ClearExit(f.root); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadExit(f.root); got != nil {
		t.Errorf("marker still there: %+v", got)
	}
}

func TestExitMessage(t *testing.T) {
	e := Exit{Kind: 1026, Reason: "runnable task stall", Msg: "kworker/1:2[812] failed to run for 5.004s"}
	if got, want := e.Message(), "kernel ejected latencytier: runnable task stall (kworker/1:2[812] failed to run for 5.004s)"; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	if got := (Exit{Kind: 67}).Message(); got != "kernel ejected latencytier: exit kind 67" {
		t.Errorf("Message without reason = %q", got)
	}
}

func TestHostileMarker(t *testing.T) {
	f := newFixture(t)
	dir, err := f.root.OwnStateDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ExitFile), []byte(`{"reason":"`+strings.Repeat("x", 5000)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ex, err := ReadExit(f.root)
	if err != nil || ex == nil || len(ex.Reason) > 200 {
		t.Errorf("ReadExit = %d-byte reason, %v; want bounded", len(ex.Reason), err)
	}
	if err := os.WriteFile(filepath.Join(dir, ExitFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ex, err := ReadExit(f.root); err != nil || ex == nil {
		t.Errorf("an unreadable marker must still block reloads: %+v, %v", ex, err)
	}
}

func TestKnob(t *testing.T) {
	k := Knob(Tier)
	if k.ID != "scheduler/class" || k.Access != Access || k.Desired != "ext:latencytier" || !Access.Claims(k.Path) || Access.InRoot || Access.SurvivesReboot {
		t.Errorf("knob %+v", k)
	}
}

// The class the API says a node reports under scheduler.class Tier (the
// rollout's verdict judges windows under it as the profile's own change)
// is the one this scheduler reports.
func TestTierIsTheAPIsReportedClass(t *testing.T) {
	if got := v1alpha1.SchedulerClassTier.ReportedClass(); got != Tier {
		t.Errorf("v1alpha1.SchedulerClassTier.ReportedClass() = %q, the scheduler reports %q", got, Tier)
	}
}

// With Wake, the watcher makes no check while the tier scheduler is
// neither wanted nor pinned: a pin and an ejection that appear then are
// not seen (before issue 43's change it stat'ed every Interval on every
// node, and recorded this one at once). Once a pass wants the scheduler
// and wakes it, it checks every Interval and records the ejection.
func TestWatcherIdleUntilWanted(t *testing.T) {
	f := newFixture(t)
	f.schedExt(schedext.StateDisabled, 5, "")
	var wanted atomic.Bool
	wake := make(chan struct{}, 1)
	ejected := make(chan *Exit, 16)
	w := &Watcher{Root: f.root, Revision: func() string { return "rev-3" }, Interval: 10 * time.Millisecond,
		Log: logr.Discard(), Wanted: wanted.Load, Wake: wake,
		OnEject: func(ex *Exit) {
			select {
			case ejected <- ex:
			default:
			}
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
	})

	time.Sleep(50 * time.Millisecond) // the watcher has gone idle
	f.write(strings.TrimPrefix(PinDir(f.root), f.root.Dir()+"/")+"/link", "")
	time.Sleep(300 * time.Millisecond) // 30 intervals
	if ex, _ := ReadExit(f.root); ex != nil {
		t.Fatalf("the idle watcher recorded %+v: it checked with nothing wanted", ex)
	}

	wanted.Store(true)
	wake <- struct{}{}
	select {
	case ex := <-ejected:
		if ex.Revision != "rev-3" || ex.EnableSeq != 5 {
			t.Errorf("ejection %+v, want rev-3 at enable_seq 5", ex)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no ejection recorded after the wake")
	}
}
