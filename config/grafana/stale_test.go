package grafana

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"sigs.k8s.io/yaml"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// staleThreshold matches "N * max by (profile) (latencytier_profile_report_interval_seconds{...}) + G":
// N heartbeat intervals and G seconds of grace.
var staleThreshold = regexp.MustCompile(`^\(?\s*(\d+) \* max by \(profile\) \(latencytier_profile_report_interval_seconds(\{[^}]*\})?\) \+ (\d+)\s*\)?$`)

// threshold parses a "stale after" expression into heartbeats and grace.
func threshold(t *testing.T, where, expr string) (heartbeats, grace int) {
	t.Helper()
	m := staleThreshold.FindStringSubmatch(expr)
	if m == nil {
		t.Fatalf("%s: %q is not N * max by (profile) (latencytier_profile_report_interval_seconds) + G", where, expr)
	}
	heartbeats, _ = strconv.Atoi(m[1])
	grace, _ = strconv.Atoi(m[3])
	return heartbeats, grace
}

// TestStaleThresholdIsOneConstant: the dashboard's "stale after" line and
// alert LatencyTierNodeStatusStale draw the same threshold, and both
// count v1alpha1.StaleHeartbeats heartbeats, as the manager's Stale node
// state and kubectl latency do. The dashboard drew 3 heartbeats + 60 s
// while the alert fired at 2 + 60 s.
func TestStaleThresholdIsOneConstant(t *testing.T) {
	var line string
	for _, p := range load(t).AllPanels() {
		for _, tg := range p.Targets {
			if tg.LegendFormat == "stale after ({{profile}})" {
				line = tg.Expr
			}
		}
	}
	if line == "" {
		t.Fatal(`the dashboard has no "stale after ({{profile}})" line`)
	}
	dashHB, dashGrace := threshold(t, "dashboard", line)

	b, err := os.ReadFile("../prometheus/latencytier.rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	var alert string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "LatencyTierNodeStatusStale" {
				alert = r.Expr
			}
		}
	}
	// time() - <last report> > on (profile) group_left () (<threshold>)
	m := regexp.MustCompile(`(?s)group_left \(\)\s*(\(.*\))\s*$`).FindStringSubmatch(alert)
	if m == nil {
		t.Fatalf("alert LatencyTierNodeStatusStale %q: no threshold after group_left ()", alert)
	}
	alertHB, alertGrace := threshold(t, "alert", m[1])

	if dashHB != alertHB || dashGrace != alertGrace {
		t.Errorf("dashboard: stale after %d heartbeats + %d s; alert: %d + %d s", dashHB, dashGrace, alertHB, alertGrace)
	}
	if alertHB != v1alpha1.StaleHeartbeats {
		t.Errorf("alert and dashboard count %d heartbeats, v1alpha1.StaleHeartbeats (the manager, kubectl latency) %d", alertHB, v1alpha1.StaleHeartbeats)
	}
}
