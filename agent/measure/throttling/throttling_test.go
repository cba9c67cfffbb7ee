package throttling

import (
	"testing"
	"time"

	"latencytier.io/latencytier/agent/podcgroup"
)

// Summarise shapes a window for status: every pod in order, the highest
// ratio of all and of the measured pods, and cgroup v2 pressure by pod.
func TestSummarise(t *testing.T) {
	batch := Pod{Pod: podcgroup.Pod{Namespace: "b", Name: "batch"}, Delta: Stat{Periods: 10, Throttled: 9, Time: time.Second}}
	api := Pod{Pod: podcgroup.Pod{Namespace: "shop", Name: "api", OptedIn: true}, Delta: Stat{Periods: 10, Throttled: 1}, Pressure: "12.00"}
	optedIn := func(p podcgroup.Pod) bool { return p.OptedIn }

	s := Summarise([]Pod{batch, api}, optedIn)
	if len(s.All) != 2 || s.All[0].Name != "batch" || s.All[0].Ratio != "0.9000" || s.All[0].ThrottledTime.Duration != time.Second {
		t.Errorf("All = %+v", s.All)
	}
	if s.Ratio != "0.9000" || s.MeasuredRatio != "0.1000" {
		t.Errorf("ratios %q, measured %q; want 0.9000 and 0.1000", s.Ratio, s.MeasuredRatio)
	}
	if len(s.Pressure) != 1 || s.Pressure["shop/api"] != "12.00" {
		t.Errorf("pressure %v", s.Pressure)
	}

	if s := Summarise([]Pod{batch}, optedIn); s.MeasuredRatio != "" {
		t.Errorf("no measured pod, measured ratio %q", s.MeasuredRatio)
	}
	if s := Summarise(nil, optedIn); s.Ratio != "" || s.All != nil {
		t.Errorf("no pods: %+v", s)
	}
	if r := (Stat{Periods: 0, Throttled: 3}).Ratio(); r != 0 {
		t.Errorf("ratio without periods = %v", r)
	}
}

// A pod granted a burst keeps its quota: its throttling is reported with
// its bursts, and it is not "opted in" to a removal that its throttling
// would show failed (the OptedInPodThrottled finding reads optedIn).
func TestSummariseBurst(t *testing.T) {
	gw := Pod{Pod: podcgroup.Pod{Namespace: "shop", Name: "gw", OptedIn: true, Burst: true},
		Delta: Stat{Periods: 10, Throttled: 1, Time: time.Millisecond, Bursts: 4, BurstTime: 30 * time.Millisecond}}
	plain := Pod{Pod: podcgroup.Pod{Namespace: "b", Name: "batch"}, Delta: Stat{Periods: 10}}
	s := Summarise([]Pod{gw, plain}, func(podcgroup.Pod) bool { return true })
	got := s.All[0]
	if got.OptedIn || !got.Burst || got.Bursts != 4 || got.BurstTime == nil || got.BurstTime.Duration != 30*time.Millisecond {
		t.Errorf("burst pod = %+v; want optedIn false, burst true, 4 bursts, 30ms", got)
	}
	if p := s.All[1]; p.Burst || p.BurstTime != nil {
		t.Errorf("a pod that never burst = %+v; want no burst figures", p)
	}
}
