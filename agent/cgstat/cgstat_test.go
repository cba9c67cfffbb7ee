package cgstat

import (
	"testing"
	"time"

	"latencytier.io/latencytier/agent/internal/testroot"
)

func TestParseMax(t *testing.T) {
	for _, bad := range []string{"", "x 100", "-5 100", "1 2 3", "100 0"} {
		if _, _, err := ParseMax(bad); err == nil {
			t.Errorf("ParseMax(%q) accepted", bad)
		}
	}
	if q, p, err := ParseMax("max"); err != nil || q != -1 || p != 0 {
		t.Errorf("ParseMax(max) = %d %d %v, want -1 0: a value as written has no period", q, p, err)
	}
	q, p, err := ParseMax("max 100000")
	if err != nil || q != -1 || p != 100000 {
		t.Errorf("ParseMax(max 100000) = %d %d %v", q, p, err)
	}
}

func TestRead(t *testing.T) {
	root := testroot.Lines(t, map[string]string{
		"v1/cpu.stat":     "nr_periods 40\nnr_throttled 12\nthrottled_time 2500000\nnr_bursts 7\nburst_time 3000000",
		"v2/cpu.stat":     "usage_usec 100\nuser_usec 50\nsystem_usec 50\nnr_periods 40\nnr_throttled 12\nthrottled_usec 2500\nnr_bursts 7\nburst_usec 3000",
		"v2none/cpu.stat": "usage_usec 100\nuser_usec 50\nsystem_usec 50",
		"bad/cpu.stat":    "nr_periods many",
	})
	for _, d := range []string{"v1", "v2"} {
		got, err := Read(root, root.Path(d))
		if err != nil || got != (Throttling{Periods: 40, Throttled: 12, Time: 2500 * time.Microsecond, Bursts: 7, BurstTime: 3 * time.Millisecond}) {
			t.Errorf("Read(%s) = %+v %v", d, got, err)
		}
	}
	if got, err := Read(root, root.Path("v2none")); err != nil || got != (Throttling{}) {
		t.Errorf("Read(v2 without bandwidth) = %+v %v", got, err)
	}
	if _, err := Read(root, root.Path("bad")); err == nil {
		t.Error("Read accepted a malformed cpu.stat")
	}
	if _, err := Read(root, root.Path("missing")); err == nil {
		t.Error("Read of a missing cgroup succeeded")
	}
}
