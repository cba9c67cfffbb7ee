package measure

import (
	"fmt"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/measure/bpf"
)

// fakeNamer names KindTask cgroups "cg-<id>" as pods, cgroup 1 as the
// victim's own pod, and everything else as the real namer does for kinds
// that need no host.
type fakeNamer struct{}

func (fakeNamer) name(victim string, o bpf.Offender) (OffenderClass, string) {
	switch o.Kind {
	case bpf.KindTask:
		if o.CgroupID == 1 {
			return OffenderSamePod, "shop/api"
		}
		return OffenderPod, fmt.Sprintf("batch/cg-%d", o.CgroupID)
	case bpf.KindIdle:
		return OffenderIdle, ""
	case bpf.KindThrottled:
		return OffenderSelfThrottling, ""
	case bpf.KindKernelThread:
		return OffenderKernelThread, o.Comm
	}
	return OffenderUnattributed, ""
}

func taskCharge(victim, cg, ns uint64) bpf.Charge {
	return bpf.Charge{Victim: victim, Offender: bpf.Offender{Kind: bpf.KindTask, CgroupID: cg}, Ns: ns}
}

func TestAttributeRanksAndNames(t *testing.T) {
	victims := map[uint64]podRef{1: {"u1", "shop", "api"}, 2: {"u1", "shop", "api"}, 3: {"u3", "shop", "db"}}
	a := &bpf.Attribution{
		Charges: []bpf.Charge{
			taskCharge(1, 50, 600), taskCharge(2, 50, 100), // pod and container cgroup of one pod add up
			taskCharge(1, 1, 200),
			{Victim: 2, Offender: bpf.Offender{Kind: bpf.KindIdle}, Ns: 50},
			{Victim: 3, Offender: bpf.Offender{Kind: bpf.KindThrottled}, Ns: 90},
			taskCharge(99, 50, 1000), // a cgroup no longer measured: dropped
		},
		Victims: []bpf.VictimWait{
			{Victim: 1, WaitNs: 800, Waits: 3},
			{Victim: 2, WaitNs: 150, Waits: 2, OtherNs: 0},
			{Victim: 3, WaitNs: 100, Waits: 1, OtherNs: 10},
			{Victim: 99, WaitNs: 1000, Waits: 1},
		},
	}
	got := attribute(a, victims, fakeNamer{})
	if len(got) != 2 || got[0].Name != "api" || got[1].Name != "db" {
		t.Fatalf("pods %+v, want api then db", got)
	}
	api := got[0]
	if api.Wait != 950 || api.Waits != 5 {
		t.Errorf("api wait %v in %d waits, want 950ns in 5", api.Wait, api.Waits)
	}
	want := []Offender{{OffenderPod, "batch/cg-50", 700}, {OffenderSamePod, "shop/api", 200}, {OffenderIdle, "", 50}}
	if fmt.Sprint(api.Offenders) != fmt.Sprint(want) {
		t.Errorf("api offenders %v, want %v", api.Offenders, want)
	}
	if s := api.Share(api.Offenders[0]); s < 0.73 || s > 0.74 {
		t.Errorf("share %v, want 700/950", s)
	}
	db := got[1]
	if len(db.Offenders) != 2 || db.Offenders[0].Class != OffenderSelfThrottling || db.Offenders[1].Class != OffenderOther ||
		db.Offenders[1].Wait != 10 || db.ByClass[OffenderOther] != 10 {
		t.Errorf("db %+v: want self-throttling first and the map's overflow as Other last", db)
	}
}

// TestAttributeBoundsOffenders: 10 000 distinct offender cgroups give one
// pod MaxOffenders named offenders and one Other holding the rest, and
// ByClass still adds up to the pod's wait.
func TestAttributeBoundsOffenders(t *testing.T) {
	const n = 10000
	a := &bpf.Attribution{}
	var total uint64
	for i := uint64(0); i < n; i++ {
		ns := 1000 + i // cgroup n+99 waits most
		a.Charges = append(a.Charges, taskCharge(7, 100+i, ns))
		total += ns
	}
	a.Charges = append(a.Charges, bpf.Charge{Victim: 7, Offender: bpf.Offender{Kind: bpf.KindKernelThread, Comm: "kworker/0:1"}, Ns: 5})
	total += 5
	a.Victims = []bpf.VictimWait{{Victim: 7, WaitNs: total + 40, Waits: n, OtherNs: 40}}
	got := attribute(a, map[uint64]podRef{7: {"u7", "shop", "api"}}, fakeNamer{})
	if len(got) != 1 {
		t.Fatalf("pods %+v", got)
	}
	p := got[0]
	if len(p.Offenders) != MaxOffenders+1 {
		t.Fatalf("%d offenders, want %d named and one Other", len(p.Offenders), MaxOffenders)
	}
	if p.Offenders[0].Name != fmt.Sprintf("batch/cg-%d", 100+n-1) {
		t.Errorf("top offender %+v", p.Offenders[0])
	}
	var sum, classes time.Duration
	for _, o := range p.Offenders {
		sum += o.Wait
	}
	for _, d := range p.ByClass {
		classes += d
	}
	last := p.Offenders[MaxOffenders]
	if last.Class != OffenderOther || sum != p.Wait || classes != p.Wait || len(p.ByClass) != 3 {
		t.Errorf("last %+v, offenders sum %v, classes sum %v (%d classes), wait %v", last, sum, classes, len(p.ByClass), p.Wait)
	}
}

func TestIRQThreads(t *testing.T) {
	for comm, want := range map[string]bool{"ksoftirqd/1": true, "irq/24-virtio0": true, "kworker/1:0": false, "kdamond.0": false} {
		if isIRQThread(comm) != want {
			t.Errorf("isIRQThread(%q) = %v", comm, !want)
		}
	}
}
