//go:build privileged

package irq

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
	"latencytier.io/latencytier/internal/privtest"
)

func irqPath(n int) string { return "/proc/irq/" + strconv.Itoa(n) + "/smp_affinity_list" }

// Real IRQs: 24 and 41 move; 36 (virtio block queue) refuses and must be
// reported Immovable with its number and name, without failing the rest.
func TestRealIRQs(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	before := testroot.Snapshot(t)
	for _, n := range []int{24, 36, 41} {
		if _, err := os.Stat(irqPath(n)); err != nil {
			privtest.Missing(t, "IRQ %d not on this machine", n)
		}
	}
	all, err := Knobs(root, cpuset.New(1))
	if err != nil {
		t.Fatal(err)
	}
	var knobs []knob.Knob
	for _, k := range all {
		if k.ID == "irq/24" || k.ID == "irq/36" || k.ID == "irq/41" || k.ID == defaultID {
			knobs = append(knobs, k)
			testroot.Restore(t, k.Path)
		}
	}
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	rep, err := e.Apply(apply.Meta{Profile: "irq-test"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]v1alpha1.SettingResult{}
	for _, r := range rep.Results {
		got[r.Setting] = r
	}
	for _, id := range []string{"irq/24", "irq/41", defaultID} {
		if got[id].State != v1alpha1.SettingApplied {
			t.Errorf("%s = %+v, want Applied", id, got[id])
		}
	}
	if r := got["irq/36"]; r.State != v1alpha1.SettingImmovable || !strings.Contains(r.Message, "IRQ 36 (") {
		t.Errorf("irq/36 = %+v, want Immovable naming IRQ 36", r)
	}
	if v := testroot.Read(t, irqPath(41)); v != "1" {
		t.Errorf("IRQ 41 affinity = %s, want 1", v)
	}
	// The next pass does not retry the immovable IRQ, still reports it, and
	// writes nothing.
	rep, err = e.Apply(apply.Meta{Profile: "irq-test"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written != 0 {
		t.Errorf("second pass wrote %d values, want 0", rep.Written)
	}
	for _, r := range rep.Results {
		if r.Setting == "irq/36" && r.State != v1alpha1.SettingImmovable {
			t.Errorf("second pass irq/36 = %+v", r)
		}
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if d := testroot.Diff(before, testroot.Snapshot(t)); len(d) != 0 {
		t.Fatalf("IRQ state differs after revert: %v", d)
	}
}
