package fleetsim

import (
	"context"
	"latencytier.io/latencytier/internal/testassets"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func assets(tb testing.TB) string { return testassets.Dir(tb) }

func smallFleet(tb testing.TB, n int) Options {
	return Options{Nodes: n, Assets: assets(tb), CRDDir: filepath.Join("..", "..", "..", "config", "crd", "bases"),
		Interval: 5 * time.Second, Resync: 5 * time.Second, Settle: time.Second, Heartbeat: 4 * time.Second,
		Steady: 6 * time.Second, Quiet: 3 * time.Second, Timeout: time.Minute,
		Drift: 1, Fail: 1, Regress: 1, Vanish: 1}
}

// TestSmallFleet runs 20 simulated agents against the real API server and
// the in-process manager, and checks the simulator itself: every node
// reports, the failing node reports Applied False, the vanished node's
// LatencyNode goes, agents' measurement writes show up in the API server's
// counters under their own FlowSchema, a silenced agent's node is shown
// Stale within three heartbeats, and the report renders.
func TestSmallFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and 20 agents")
	}
	o := smallFleet(t, 20)
	var log strings.Builder
	o.Progress = &log
	res, err := Run(context.Background(), o)
	t.Log(log.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Reported != 20 || res.Applied != 19 {
		t.Errorf("reported %d, applied %d; want 20 reported, 19 applied (one node fails a setting)", res.Reported, res.Applied)
	}
	if res.Apply <= 0 || res.SpecChange <= 0 || res.VanishCleanup <= 0 {
		t.Errorf("apply %s, spec change %s, vanish cleanup %s: want all measured", res.Apply, res.SpecChange, res.VanishCleanup)
	}
	// 20 agents measuring every 5 s write about 240 statuses a minute,
	// and nothing else once they watch; the manager writes no agent status.
	if w := res.Steady.AgentStatusWrites; w < 60 || w > res.Steady.AgentRequests {
		t.Errorf("agents' status writes %.0f/min of %.0f requests/min in the steady window; want about 240",
			w, res.Steady.AgentRequests)
	}
	// With measurement Disabled and nothing changing, the agents write
	// their heartbeats only: at most one per node per heartbeat.
	if w, most := res.Quiet.AgentStatusWrites, 20*time.Minute.Seconds()/o.Heartbeat.Seconds()*1.25; w > most {
		t.Errorf("agents wrote %.0f statuses/min with measurement Disabled and nothing changing; heartbeats allow %.0f", w, most)
	}
	if res.Heartbeat != o.Heartbeat {
		t.Errorf("nodes report heartbeat %s, want %s", res.Heartbeat, o.Heartbeat)
	}
	if res.StaleAfter <= 0 || res.StaleAfter > 3*o.Heartbeat {
		t.Errorf("silenced node shown Stale after %s (limit %s); want within three heartbeats", res.StaleAfter, res.StaleLimit)
	}
	if res.ManagerMeasured {
		t.Error("in-process manager reported as measured")
	}
	md, line := Report([]Result{res}, "")
	if !strings.Contains(md, "| 20 | new (heartbeat 4s)") || !strings.Contains(line, "FAIL") && !strings.Contains(line, "PASS") {
		t.Errorf("report:\n%s\nsummary: %s", md, line)
	}
}

// BenchmarkFleet50 runs a 50-node fleet once per iteration and reports its
// headline figures.
//
//	go test ./hack/scale/fleetsim -run '^$' -bench Fleet50 -benchtime 1x
func BenchmarkFleet50(b *testing.B) {
	for i := 0; i < b.N; i++ {
		o := smallFleet(b, 50)
		// Settle long enough that the quiet window starts quiet.
		o.Settle, o.Steady, o.Quiet = 5*time.Second, 30*time.Second, 15*time.Second
		res, err := Run(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.Apply.Seconds(), "s-to-all-applied")
		b.ReportMetric(res.SpecChange.Seconds(), "s-spec-change")
		b.ReportMetric(res.Steady.ManagerRequests, "mgr-req/min")
		b.ReportMetric(res.Steady.AgentRequests, "agent-req/min")
		b.ReportMetric(res.Steady.ProfileStatusWrites, "profile-status-writes/min")
		b.ReportMetric(res.Quiet.ManagerWrites, "quiet-mgr-writes")
	}
}
