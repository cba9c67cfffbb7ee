package power

import (
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Power knobs ride the common engine: journaled before the first write,
// drift re-asserted on the next pass, restored exactly on revert.
func TestPowerKnobsAreJournaledReassertedAndReverted(t *testing.T) {
	root := fakeRoot(t, server)
	ks, _ := Knobs(root, tuning("0-1", "2-3", v1alpha1.PowerSpec{
		Isolated: &v1alpha1.CPUPower{MaxIdleExitLatency: us(0), Governor: gov(v1alpha1.GovernorPerformance)}}))
	qos := root.Sys("devices", "system", "cpu", "cpu2", "power", "pm_qos_resume_latency_us")
	c6 := root.Sys("devices", "system", "cpu", "cpu3", "cpuidle", "state3", "disable")
	freq := root.Sys("devices", "system", "cpu", "cpufreq", "policy2", "scaling_governor")
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	rep, err := e.Apply(apply.Meta{Profile: "p"}, ks)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.State != v1alpha1.SettingApplied {
			t.Fatalf("result %+v, want Applied", r)
		}
	}
	if testroot.Read(t, qos) != "n/a" || testroot.Read(t, c6) != "1" || testroot.Read(t, freq) != "performance" {
		t.Fatalf("applied: qos %q c6 %q governor %q", testroot.Read(t, qos), testroot.Read(t, c6), testroot.Read(t, freq))
	}
	// Someone (tuned, a runtime) lifts the limit: the next pass puts it back.
	testroot.Write(t, qos, "0\n")
	rep, err = e.Apply(apply.Meta{Profile: "p"}, ks)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drifts) != 1 || rep.Drifts[0].ID != "power/cpu2/resume-latency" || rep.Drifts[0].Theirs != "0" || testroot.Read(t, qos) != "n/a" {
		t.Fatalf("drifts %+v, qos %q", rep.Drifts, testroot.Read(t, qos))
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if testroot.Read(t, qos) != "0" || testroot.Read(t, c6) != "0" || testroot.Read(t, freq) != "powersave" {
		t.Fatalf("reverted: qos %q c6 %q governor %q", testroot.Read(t, qos), testroot.Read(t, c6), testroot.Read(t, freq))
	}
}
