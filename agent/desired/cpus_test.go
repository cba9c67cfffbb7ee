package desired_test

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func cpusSpec(reserved string) v1alpha1.TuningSpec {
	return v1alpha1.TuningSpec{
		CPUs: &v1alpha1.CPUSpec{Reserved: &reserved},
		IRQ:  &v1alpha1.IRQSpec{Affinity: v1alpha1.IRQAffinityReserved},
	}
}

func twoCPUHost() map[string]string {
	return map[string]string{
		"sys/devices/system/cpu/online":          "0-1",
		"proc/irq/default_smp_affinity":          "3",
		"proc/irq/24/smp_affinity_list":          "0-1",
		"sys/fs/cgroup/cgroup.controllers":       "cpuset cpu",
		"sys/fs/cgroup/cgroup.subtree_control":   "cpuset cpu",
		"sys/fs/cgroup/system.slice/cpuset.cpus": "",
	}
}

// TestReservedOfflineIsInvalidOnce: reserved CPUs the node does not have
// online are reported Invalid and become no knob, so no pass journals
// (fsyncs) or writes anything; the kernel would refuse every write with
// EINVAL, pass after pass.
func TestReservedOfflineIsInvalidOnce(t *testing.T) {
	root := testroot.New(t, twoCPUHost())
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	for pass := 0; pass < 3; pass++ {
		ds := desired.Render(root, sysctl.Layout{}, cpusSpec("0-3"), nil, nil)
		if len(ds.Knobs) != 0 {
			t.Fatalf("pass %d: knobs for an offline reserved set: %v", pass, ds.Knobs[0].ID)
		}
		var inv *v1alpha1.SettingResult
		for i, r := range ds.Results {
			if r.Setting == "cpus/reserved" {
				inv = &ds.Results[i]
			}
		}
		if inv == nil || inv.State != v1alpha1.SettingInvalid || !strings.Contains(inv.Message, "2-3") {
			t.Fatalf("pass %d: cpus/reserved result = %+v; want Invalid naming CPUs 2-3", pass, inv)
		}
		rep, err := e.Apply(apply.Meta{Profile: "p"}, ds.Knobs)
		if err != nil || rep.Written != 0 {
			t.Fatalf("pass %d: wrote %d, %v", pass, rep.Written, err)
		}
		if _, err := os.Stat(journal.Path(root)); err == nil {
			t.Fatalf("pass %d: journal written for a spec that changes nothing", pass)
		}
	}
	// Online reserved CPUs are confined as before.
	if ds := desired.Render(root, sysctl.Layout{}, cpusSpec("0"), nil, nil); len(ds.Knobs) == 0 {
		t.Fatalf("no knobs for reserved 0: %+v", ds.Results)
	}
}

// TestHugeReservedRefusedCheaply: "0-5000000" is refused as not a cpulist
// without expanding it (cpuset.Parse alone allocates hundreds of MiB).
func TestHugeReservedRefusedCheaply(t *testing.T) {
	root := testroot.New(t, twoCPUHost())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ds := desired.Render(root, sysctl.Layout{}, cpusSpec("0-5000000"), nil, nil)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Fatalf("Render allocated %d MiB for reserved 0-5000000; want < 8 MiB", grew>>20)
	}
	if len(ds.Knobs) != 0 || len(ds.Results) == 0 || ds.Results[0].State != v1alpha1.SettingInvalid ||
		!strings.Contains(ds.Results[0].Message, "out of range") {
		t.Fatalf("Render(0-5000000) = %d knobs, %+v; want one Invalid out of range", len(ds.Knobs), ds.Results)
	}
}
