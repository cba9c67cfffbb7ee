package power

import (
	"strings"
	"testing"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func budget(t v1alpha1.TuningSpec, p99 int) v1alpha1.TuningSpec {
	t.LatencyBudget = &v1alpha1.LatencyBudget{RunQueueP99: us(p99)}
	return t
}

func TestDeepIdleOnIsolatedCPUs(t *testing.T) {
	root := fakeRoot(t, server)
	spec := budget(tuning("0-1", "2-3", v1alpha1.PowerSpec{}), 100) // deep: above 10µs
	fs := Findings(root, spec)
	if len(fs) != 1 || fs[0].Type != FindingDeepIdle || fs[0].Severity != "Warning" ||
		!strings.Contains(fs[0].Message, "cpu2 C6 133µs") || !strings.Contains(fs[0].Message, "cpu3 C6 133µs") || strings.Contains(fs[0].Message, "C1E") {
		t.Fatalf("findings %+v", fs)
	}
	// A PM QoS limit at or below 10µs excludes C6: no finding.
	for _, cpu := range []string{"cpu2", "cpu3"} {
		writeFile(t, root.Sys("devices", "system", "cpu", cpu, "power", "pm_qos_resume_latency_us"), "10")
	}
	if fs := Findings(root, spec); len(fs) != 0 {
		t.Fatalf("with PM QoS 10µs: %+v", fs)
	}
	// ... unless the governor is haltpoll, which reads only a limit of 0
	// and then picks state 1 whatever its latency.
	writeFile(t, root.Sys("devices", "system", "cpu", "cpuidle", "current_governor"), "haltpoll")
	spec = budget(spec, 10) // deep: above 1µs, so C1 (2µs) counts
	if fs := Findings(root, spec); len(fs) != 1 || !strings.Contains(fs[0].Message, "cpu2 C1 2µs") || !strings.Contains(fs[0].Message, "haltpoll") {
		t.Fatalf("haltpoll with PM QoS 10µs: %+v", fs)
	}
	for _, cpu := range []string{"cpu2", "cpu3"} {
		writeFile(t, root.Sys("devices", "system", "cpu", cpu, "power", "pm_qos_resume_latency_us"), "n/a")
	}
	if fs := Findings(root, spec); len(fs) != 0 {
		t.Fatalf("haltpoll with n/a (polling): %+v", fs)
	}
}

func TestDisabledStatesAreNotDeep(t *testing.T) {
	root := fakeRoot(t, server)
	for _, cpu := range []string{"cpu2", "cpu3"} {
		writeFile(t, root.Sys("devices", "system", "cpu", cpu, "cpuidle", "state3", "disable"), "1")
	}
	if fs := Findings(root, budget(tuning("0-1", "2-3", v1alpha1.PowerSpec{}), 100)); len(fs) != 0 {
		t.Fatalf("findings %+v", fs)
	}
}

func TestNoFindingWithoutBudgetIsolationOrWithIdlePoll(t *testing.T) {
	root := fakeRoot(t, server)
	if fs := Findings(root, tuning("0-1", "2-3", v1alpha1.PowerSpec{})); len(fs) != 0 {
		t.Fatalf("no budget: %+v", fs)
	}
	if fs := Findings(root, budget(tuning("0-3", "", v1alpha1.PowerSpec{}), 100)); len(fs) != 0 {
		t.Fatalf("no isolated CPUs: %+v", fs)
	}
	writeFile(t, root.Proc("cmdline"), "quiet idle=poll")
	if fs := Findings(root, budget(tuning("0-1", "2-3", v1alpha1.PowerSpec{}), 100)); len(fs) != 0 {
		t.Fatalf("idle=poll: %+v", fs)
	}
}

// This machine's layout: no cpuidle driver. A limit the profile sets for
// the isolated CPUs reaches PM QoS but no idle path reads it.
func TestLimitWithoutCpuidleDriverIsNotEnforced(t *testing.T) {
	root := fakeRoot(t, layout{cpus: 2, qos: true, driver: "none", governor: "menu"})
	spec := tuning("0", "1", v1alpha1.PowerSpec{Isolated: &v1alpha1.CPUPower{MaxIdleExitLatency: us(0)}})
	fs := Findings(root, spec)
	if len(fs) != 1 || fs[0].Type != findingIdleLimitNotEnforced || !strings.Contains(fs[0].Message, "power.isolated.maxIdleExitLatency 0s") {
		t.Fatalf("findings %+v", fs)
	}
	if fs := Findings(root, tuning("0", "1", v1alpha1.PowerSpec{})); len(fs) != 0 {
		t.Fatalf("no limit asked: %+v", fs)
	}
}
