package grafana

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/measure"
	agentmetrics "latencytier.io/latencytier/agent/metrics"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	// The manager's metrics: its package registers them with
	// controller-runtime's registry when it loads.
	_ "latencytier.io/latencytier/controllers"
)

const dashboardFile = "latencytier.json"

func load(t *testing.T) *Dashboard {
	t.Helper()
	d, err := Load(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func queries(t *testing.T, d *Dashboard) []Query {
	t.Helper()
	qs, err := d.Queries()
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// TestDashboardParses: the file is a dashboard Grafana can import: JSON,
// a title and uid, panels, and a Prometheus data source variable the
// panels use (so it imports into any Grafana, whatever its data source is
// called).
func TestDashboardParses(t *testing.T) {
	d := load(t)
	if d.Title == "" || d.UID == "" || len(d.AllPanels()) == 0 {
		t.Fatalf("title %q, uid %q, %d panels", d.Title, d.UID, len(d.AllPanels()))
	}
	var raw map[string]any
	b, _ := os.ReadFile(dashboardFile)
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"uid": "${datasource}"`)) {
		t.Error(`panels do not use the ${datasource} variable`)
	}
	ids := map[int]bool{}
	for _, p := range d.AllPanels() {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
	}
}

// TestEveryPanelHasAQuery: a panel without a query shows nothing.
func TestEveryPanelHasAQuery(t *testing.T) {
	for _, p := range load(t).AllPanels() {
		if len(p.Targets) == 0 {
			t.Errorf("panel %d %q has no query", p.ID, p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
				t.Errorf("panel %d %q: target %q has no expression or refId", p.ID, p.Title, tg.RefID)
			}
		}
	}
}

// TestQueriesParseAsPromQL: promtool checks a rules file with one
// recording rule per query (expanded as Grafana expands it with every
// variable at All), so each must parse as PromQL.
func TestQueriesParseAsPromQL(t *testing.T) {
	d := load(t)
	rules, where := rulesFile(t, d)
	file := filepath.Join(t.TempDir(), "dashboard.rules.yaml")
	if err := os.WriteFile(file, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool(t), "check", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s\nrules (%s):\n%s", err, out, strings.Join(where, "; "), rules)
	}
	t.Logf("promtool check rules on %d dashboard queries:\n%s", len(where), out)
}

// rulesFile is a rules file with one recording rule per query of d.
func rulesFile(t *testing.T, d *Dashboard) ([]byte, []string) {
	t.Helper()
	e := d.NewExpander("5m", "1h")
	var rules []map[string]string
	var where []string
	for i, q := range queries(t, d) {
		expr, err := e.Expand(q.Expr)
		if err != nil {
			t.Fatalf("%s: %v", q.Where, err)
		}
		rules = append(rules, map[string]string{"record": fmt.Sprintf("latencytier_dashboard:query_%d", i), "expr": expr})
		where = append(where, fmt.Sprintf("query_%d = %s", i, q.Where))
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	return b, where
}

// TestPromtoolRejectsABrokenQuery: the check above can fail.
func TestPromtoolRejectsABrokenQuery(t *testing.T) {
	d := &Dashboard{Panels: []Panel{{ID: 1, Title: "broken", Targets: []Target{{RefID: "A", Expr: "sum by (node (latencytier_journal_entries)"}}}}}
	rules, _ := rulesFile(t, d)
	file := filepath.Join(t.TempDir(), "broken.rules.yaml")
	if err := os.WriteFile(file, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "check", "rules", file).CombinedOutput(); err == nil {
		t.Fatalf("promtool accepted %s:\n%s", rules, out)
	}
}

// registered says whether a metric of that name is in the agent's
// collector, the manager's registry (controller-runtime's, with the
// manager's metrics and controller-runtime's own) or the recording rules.
func registered(t *testing.T) func(name string) bool {
	t.Helper()
	agent := map[string]bool{}
	ch := make(chan *prometheus.Desc, 64)
	agentmetrics.New(host.New(t.TempDir())).Describe(ch)
	close(ch)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for desc := range ch {
		m := fq.FindStringSubmatch(desc.String())
		if m == nil {
			t.Fatalf("no fqName in %s", desc)
		}
		agent[m[1]] = true
	}
	rules := map[string]bool{}
	b, err := os.ReadFile(filepath.Join("..", "prometheus", "latencytier.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Record string `json:"record"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				rules[r.Record] = true
			}
		}
	}
	return func(name string) bool {
		if name == "up" || rules[name] {
			return true
		}
		for _, n := range []string{name, strings.TrimSuffix(name, "_bucket"), strings.TrimSuffix(name, "_count"), strings.TrimSuffix(name, "_sum")} {
			if agent[n] || inManagerRegistry(n) {
				return true
			}
		}
		return false
	}
}

// inManagerRegistry: the registry refuses a gauge whose name it holds with
// other labels or help, and takes (and here gives back) one it does not.
func inManagerRegistry(name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "dashboard test probe"})
	if err := ctrlmetrics.Registry.Register(probe); err != nil {
		return true
	}
	ctrlmetrics.Registry.Unregister(probe)
	return false
}

// TestQueriesNameRegisteredMetrics: every metric a query names is one the
// agent or the manager serves (or a recording rule of config/prometheus),
// and every query names at least one of ours.
func TestQueriesNameRegisteredMetrics(t *testing.T) {
	known := registered(t)
	for _, name := range []string{"latencytier_profile_nodes", "latencytier_node_runqueue_latency_seconds_bucket", "latencytier_journal_entries"} {
		if !known(name) {
			t.Fatalf("%s not found in the registries: the lookup is broken", name)
		}
	}
	if known("latencytier_no_such_metric") {
		t.Fatal("latencytier_no_such_metric found: the lookup is broken")
	}
	for _, q := range queries(t, load(t)) {
		names := MetricNames(q.Expr)
		if len(names) == 0 {
			t.Errorf("%s: names no latencytier metric: %s", q.Where, q.Expr)
		}
		for _, n := range names {
			if !known(n) {
				t.Errorf("%s: metric %s is served by neither the agent nor the manager", q.Where, n)
			}
		}
	}
}

// TestExpandRefusesUndefinedVariables: a query may use only the
// dashboard's variables and Grafana's intervals.
func TestExpandRefusesUndefinedVariables(t *testing.T) {
	e := load(t).NewExpander("1m", "1h")
	got, err := e.Expand(`rate(x{node=~"$node",profile=~"${profile}"}[$__rate_interval])`)
	if err != nil || got != `rate(x{node=~".+",profile=~".+"}[1m])` {
		t.Errorf("Expand = %q, %v", got, err)
	}
	if _, err := e.Expand(`x{pod=~"$pod"}`); err == nil || !strings.Contains(err.Error(), "$pod") {
		t.Errorf("Expand of $pod: %v, want an error naming $pod", err)
	}
}

// promtool finds promtool (Debian package prometheus, make deps), as
// config/prometheus' tests do: missing, it skips unless CI or
// LATENCYTIER_REQUIRE_PROMTOOL (make test) is set.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("LATENCYTIER_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool not found: install the Debian package prometheus (make deps)")
		}
		t.Skip("promtool not found; make deps installs it (CI=1 or LATENCYTIER_REQUIRE_PROMTOOL=1 make this a failure)")
	}
	return p
}

// agentEndpoint serves the agent's real collector after one measured
// window: histograms of two CPU classes, two pods' throttling, one pod's
// attributed waits, a setting and its re-assert.
func agentEndpoint(t *testing.T) string {
	t.Helper()
	c := agentmetrics.New(host.New(t.TempDir()))
	node, isolated := &measure.Hist{}, &measure.Hist{}
	node.Record(40_000, 1000)
	node.Record(900_000, 5)
	isolated.Record(3_000, 500)
	c.Measured(&measure.Result{
		Hists: map[string]*measure.Hist{"node": node, "isolated": isolated},
		AllThrottling: []v1alpha1.PodThrottling{
			{Namespace: "shop", Name: "gateway-0", OptedIn: true, Periods: 600, Throttled: 0},
			{Namespace: "batch", Name: "tar-0", Periods: 600, Throttled: 300, ThrottledTime: &metav1.Duration{Duration: 2 * time.Second}},
		},
		Attribution: []measure.PodAttribution{{Namespace: "shop", Name: "gateway-0", Wait: 5 * time.Millisecond,
			ByClass: map[measure.OffenderClass]time.Duration{measure.OffenderPod: 4 * time.Millisecond, measure.OffenderInterrupt: time.Millisecond}}},
	})
	c.Observed(v1alpha1.LatencyNodeSpec{Profile: "latency"}, v1alpha1.LatencyNodeStatus{
		Settings: []v1alpha1.SettingResult{{Setting: "scheduler/autogroup", State: v1alpha1.SettingApplied}}})
	c.Reasserted([]string{"scheduler/autogroup"})
	return serve(t, c)
}

// managerEndpoint serves the manager's profile and node series under the
// names and labels controllers/metrics.go registers (TestQueries-
// NameRegisteredMetrics checks the names): a stand-in, because those
// gauges are set only by the profile reconciler; the e2e scrapes the real
// manager.
func managerEndpoint(t *testing.T) string {
	t.Helper()
	g := func(name string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: name}, labels)
	}
	nodes, verdicts, failed := g("latencytier_profile_nodes", "profile", "state"), g("latencytier_profile_rollout_nodes", "profile", "verdict"),
		g("latencytier_profile_rollout_failed_nodes", "profile")
	interval, last := g("latencytier_profile_report_interval_seconds", "profile"), g("latencytier_node_last_report_timestamp_seconds", "node", "profile")
	nodes.WithLabelValues("latency", "Applied").Set(1)
	verdicts.WithLabelValues("latency", "Improved").Set(1)
	failed.WithLabelValues("latency").Set(0)
	interval.WithLabelValues("latency").Set(30)
	last.WithLabelValues("w-1", "latency").Set(float64(time.Now().Unix()))
	return serve(t, nodes, verdicts, failed, interval, last)
}

func serve(t *testing.T, cs ...prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(cs...)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// runPrometheus starts Debian's prometheus on loopback, scraping each
// target (address → target labels) every second, and returns its URL.
func runPrometheus(t *testing.T, targets map[string]map[string]string) string {
	t.Helper()
	bin := filepath.Join(filepath.Dir(promtool(t)), "prometheus")
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("prometheus"); err != nil {
			t.Fatal("promtool without prometheus: install the Debian package prometheus (make deps)")
		}
	}
	var static []map[string]any
	for addr, labels := range targets {
		static = append(static, map[string]any{"targets": []string{addr}, "labels": labels})
	}
	cfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"scrape_configs": []any{map[string]any{"job_name": "latencytier", "static_configs": static}},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus.yml:\n%s\nprometheus log:\n%s", cfg, log.String())
		}
	})
	return "http://" + addr
}

// check runs the checker over d until every query has data or a minute
// has passed (a Prometheus started a moment ago has scraped nothing yet).
func check(t *testing.T, prom string, d *Dashboard, wait time.Duration) []Result {
	t.Helper()
	c := Checker{URL: prom, Window: 5 * time.Minute, Step: time.Second}
	res, err := c.CheckAll(context.Background(), d, d.NewExpander("10s", "5m"), wait)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestDashboardQueriesHaveData runs every query of the dashboard, as the
// e2e's check does, against a real Prometheus scraping the agent's real
// collector and the manager's series, each labelled as the scrape labels
// them (node and component): each must return data.
func TestDashboardQueriesHaveData(t *testing.T) {
	prom := runPrometheus(t, map[string]map[string]string{
		agentEndpoint(t):   {"node": "w-1", "component": "agent"},
		managerEndpoint(t): {"component": "manager"},
	})
	d := load(t)
	for _, r := range check(t, prom, d, time.Minute) {
		if !r.OK() {
			t.Error(r)
			continue
		}
		t.Log(r)
	}
}

// TestDashboardCheckFailsWithoutData: the same check against a
// Prometheus that scrapes only the agent reports the manager's panels
// (rollout verdicts, failed nodes, node states, report age, the profile
// variable) as empty, and only those.
func TestDashboardCheckFailsWithoutData(t *testing.T) {
	prom := runPrometheus(t, map[string]map[string]string{agentEndpoint(t): {"node": "w-1", "component": "agent"}})
	d := load(t)
	// First every query that reads only the agent's series, until each
	// has data (rates need two scrapes), so what is empty below is empty
	// for want of the manager, not for want of a scrape.
	manager := regexp.MustCompile(`latencytier_(profile|node_last_report)`)
	agentOnly := &Dashboard{}
	for _, v := range d.Templating.List {
		if !manager.MatchString(v.Definition) {
			agentOnly.Templating.List = append(agentOnly.Templating.List, v)
		}
	}
	for _, p := range d.AllPanels() {
		if len(p.Targets) > 0 && !manager.MatchString(p.Targets[0].Expr) {
			agentOnly.Panels = append(agentOnly.Panels, p)
		}
	}
	if len(agentOnly.Panels) == 0 {
		t.Fatal("no panel reads only the agent's series")
	}
	for _, r := range check(t, prom, agentOnly, time.Minute) {
		if !r.OK() {
			t.Fatalf("the agent's series never arrived: %v", r)
		}
	}
	var empty []string
	for _, r := range check(t, prom, d, 0) {
		if r.Err != nil {
			t.Errorf("%v", r)
		}
		if !r.OK() {
			empty = append(empty, r.Query.Where)
		}
	}
	for _, q := range queries(t, d) {
		if manager.MatchString(q.Expr) != contains(empty, q.Where) {
			t.Errorf("%s: empty %v, want empty exactly when it reads the manager's series: %s", q.Where, contains(empty, q.Where), q.Expr)
		}
	}
	if len(empty) == 0 {
		t.Fatal("every query returned data without the manager: the check cannot fail")
	}
	t.Logf("empty without the manager: %s", strings.Join(empty, "; "))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
