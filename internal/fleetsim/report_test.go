package fleetsim

import (
	"strings"
	"testing"
	"time"
)

func TestParseCounters(t *testing.T) {
	text := `# HELP apiserver_flowcontrol_dispatched_requests_total x
apiserver_flowcontrol_dispatched_requests_total{flow_schema="fleetsim-manager-profile-status",priority_level="exempt"} 3
apiserver_flowcontrol_dispatched_requests_total{flow_schema="fleetsim-manager-writes",priority_level="exempt"} 4
apiserver_flowcontrol_dispatched_requests_total{flow_schema="fleetsim-manager-node-status",priority_level="exempt"} 2
apiserver_flowcontrol_dispatched_requests_total{flow_schema="fleetsim-manager-other",priority_level="exempt"} 5
apiserver_flowcontrol_dispatched_requests_total{flow_schema="fleetsim-agents-status",priority_level="exempt"} 100
apiserver_flowcontrol_dispatched_requests_total{flow_schema="fleetsim-agents-other",priority_level="exempt"} 7
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 999
apiserver_request_total{code="200",resource="latencynodes",subresource="status",verb="PATCH"} 500
apiserver_longrunning_requests{component="apiserver",group="tuning.latencytier.io",resource="latencynodes",scope="cluster",subresource="",verb="WATCH",version="v1alpha1"} 41
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 40
`
	c, err := parseCounters(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := counters{ManagerRequests: 14, AgentRequests: 107, ProfileStatusWrites: 3, ManagerWrites: 9, VerdictWrites: 2, AgentStatusWrites: 100, LatencyNodeWatches: 41}
	if c != want {
		t.Errorf("got %+v, want %+v", c, want)
	}
}

func goodFleet(n int) Result {
	f := float64(n)
	// A fixed part plus a linear part, as real figures have.
	return Result{Nodes: n, Apply: 2*time.Second + time.Duration(f*3)*time.Millisecond,
		SpecChange: 2*time.Second + time.Duration(f*2)*time.Millisecond, ManagerMeasured: true,
		Steady: Window{ManagerCPU: 0.5 + 0.009*f, ManagerRSS: 60 << 20, ManagerRequests: f / 10,
			AgentRequests: 2 * f, ProfileStatusWrites: 12, AgentStatusWrites: 2 * f},
		Quiet: Window{Length: time.Minute}}
}

// TestSummaryFlagsEachGoal checks that a regression in any one goal turns
// its flag, and only its flag, to FAIL.
func TestSummaryFlagsEachGoal(t *testing.T) {
	cases := []struct {
		goal   string
		breaks func(*Result)
	}{
		{"apply<20s", func(r *Result) { r.Apply = 25 * time.Second }},
		{"change<20s", func(r *Result) { r.SpecChange = 21 * time.Second }},
		{"manager<0.2core", func(r *Result) { r.Steady.ManagerCPU = 0.3 * 60 }},
		{"manager<200MiB", func(r *Result) { r.Steady.ManagerRSS = 300 << 20 }},
		{"status-coalesced", func(r *Result) { r.Steady.ProfileStatusWrites = 600 }},
		{"quiet-zero-writes", func(r *Result) { r.Quiet.ManagerWrites = 1 }},
		{"linear", func(r *Result) { r.Steady.ManagerRequests = 100 * 100 }},
	}
	// A fleet that never finished applying is a FAIL of its own; the
	// goals are judged on the largest that finished.
	stuck := goodFleet(3000)
	stuck.Incomplete = "profile created: only 2000 of 3000 nodes reported within 5m0s"
	if s := goalSummary([]Result{goodFleet(100), goodFleet(1000), stuck}); !strings.Contains(s, "complete FAIL (N=3000") ||
		strings.Count(s, "FAIL") != 1 || !strings.Contains(s, "at N=1000") {
		t.Errorf("incomplete 3000-node fleet: %s", s)
	}
	if s := goalSummary([]Result{goodFleet(100), goodFleet(1000)}); strings.Contains(s, "FAIL") {
		t.Fatalf("a fleet meeting every goal: %s", s)
	}
	for _, c := range cases {
		big := goodFleet(1000)
		c.breaks(&big)
		s := goalSummary([]Result{goodFleet(100), big})
		if !strings.Contains(s, c.goal+" FAIL") || strings.Count(s, "FAIL") != 1 {
			t.Errorf("%s broken: %s", c.goal, s)
		}
	}
}

// TestSummaryLinearFromZero checks the linear goal when the small fleet's
// manager made no requests in the steady window, as a healthy one does: a
// large fleet that also makes none passes, one that makes many fails.
func TestSummaryLinearFromZero(t *testing.T) {
	small, big := goodFleet(100), goodFleet(1000)
	small.Steady.ManagerRequests, big.Steady.ManagerRequests = 0, 0
	if s := goalSummary([]Result{small, big}); strings.Contains(s, "FAIL") {
		t.Errorf("no manager requests at either size: %s", s)
	}
	big.Steady.ManagerRequests = 500
	if s := goalSummary([]Result{small, big}); !strings.Contains(s, "linear FAIL") || strings.Count(s, "FAIL") != 1 {
		t.Errorf("500 manager requests/min at 1000 nodes, none at 100: %s", s)
	}
}
