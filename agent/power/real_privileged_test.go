//go:build privileged

package power

import (
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

// Real kernel: maxIdleExitLatency 0us on every CPU through the engine. The
// kernel must hold "n/a" (no latency tolerated), the engine must read it
// back as applied, and revert must leave every CPU's limit as it was. This
// machine has no cpufreq: the governor is Unsupported, never Failed.
func TestRealPollingLimitAppliesAndReverts(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	online, err := cpulist.Online(root)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]string{}
	for _, cpu := range online.List() {
		p := cpuDir(root, cpu, "power", "pm_qos_resume_latency_us")
		if !root.Exists(p) {
			t.Skipf("cpu%d has no pm_qos_resume_latency_us", cpu)
		}
		testroot.Restore(t, p)
		before[p] = testroot.Read(t, p)
	}
	ks, rs := Knobs(root, v1alpha1.TuningSpec{Power: &v1alpha1.PowerSpec{
		All: &v1alpha1.CPUPower{MaxIdleExitLatency: us(0), Governor: gov(v1alpha1.GovernorPerformance)}}})
	if len(ks) < online.Size() {
		t.Fatalf("knobs %q, want one resume-latency per online CPU", summary(ks))
	}
	for _, r := range rs {
		if r.State == v1alpha1.SettingFailed {
			t.Fatalf("result %+v: a missing file is never Failed", r)
		}
	}
	if !root.Exists(cpuDir(root, online.List()[0], "cpufreq")) &&
		(len(rs) != 1 || rs[0].Setting != "power/all/governor" || rs[0].State != v1alpha1.SettingUnsupported) {
		t.Fatalf("results %+v, want power/all/governor Unsupported (no cpufreq here)", rs)
	}
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	rep, err := e.Apply(apply.Meta{Profile: "t"}, ks)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.State != v1alpha1.SettingApplied {
			t.Fatalf("result %+v, want Applied (the engine must read n/a back as ours)", r)
		}
	}
	for p := range before {
		if v := testroot.Read(t, p); v != "n/a" {
			t.Fatalf("%s = %q after apply, want n/a", p, v)
		}
	}
	// The limit lifted by someone else is drift, re-asserted.
	first := cpuDir(root, online.List()[0], "power", "pm_qos_resume_latency_us")
	if err := root.WriteString(first, "0"); err != nil {
		t.Fatal(err)
	}
	rep, err = e.Apply(apply.Meta{Profile: "t"}, ks)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drifts) != 1 || testroot.Read(t, first) != "n/a" {
		t.Fatalf("drifts %+v, %s = %q", rep.Drifts, first, testroot.Read(t, first))
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	for p, v := range before {
		if got := testroot.Read(t, p); got != v {
			t.Errorf("%s = %q after revert, want %q", p, got, v)
		}
	}
}

// This machine's kernel has no cpuidle driver: a limit on the isolated CPUs
// is reported as not enforced rather than silently trusted.
func TestRealLimitWithoutCpuidleDriverIsReported(t *testing.T) {
	root := testroot.RealKernel(t)
	driver, err := root.ReadString(root.Sys("devices", "system", "cpu", "cpuidle", "current_driver"))
	if err != nil || driver != "none" {
		t.Skipf("cpuidle driver %q: this check is for a kernel without one", driver)
	}
	fs := Findings(root, tuning("0", "1", v1alpha1.PowerSpec{Isolated: &v1alpha1.CPUPower{MaxIdleExitLatency: us(0)}}))
	if len(fs) != 1 || fs[0].Type != findingIdleLimitNotEnforced {
		t.Fatalf("findings %+v", fs)
	}
}
