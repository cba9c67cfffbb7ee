package prometheus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/measure"
	agentmetrics "latencytier.io/latencytier/agent/metrics"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// The agent pod as Kubernetes service discovery (role: pod) describes it:
// the labels the Prometheus Operator's relabelling reads.
const (
	agentNamespace = "latencytier-system"
	agentPod       = "latencytier-agent-x7k2p"
	agentNode      = "w-1"
)

// podMonitor is the part of config/prometheus/podmonitor.yaml the operator
// turns into a scrape config.
type podMonitor struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		PodMetricsEndpoints []struct {
			Port              string        `json:"port"`
			HonorLabels       bool          `json:"honorLabels"`
			Relabelings       []relabelling `json:"relabelings"`
			MetricRelabelings []relabelling `json:"metricRelabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type relabelling struct {
	SourceLabels []string `json:"sourceLabels,omitempty"`
	Separator    string   `json:"separator,omitempty"`
	TargetLabel  string   `json:"targetLabel,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
	Modulus      uint64   `json:"modulus,omitempty"`
}

// promRelabel is one relabel_configs entry, as Prometheus reads it.
func (r relabelling) promRelabel() map[string]any {
	m := map[string]any{}
	if len(r.SourceLabels) > 0 {
		m["source_labels"] = r.SourceLabels
	}
	if r.Separator != "" {
		m["separator"] = r.Separator
	}
	if r.TargetLabel != "" {
		m["target_label"] = r.TargetLabel
	}
	if r.Regex != "" {
		m["regex"] = r.Regex
	}
	if r.Replacement != nil {
		m["replacement"] = *r.Replacement
	}
	if r.Action != "" {
		m["action"] = strings.ToLower(r.Action)
	}
	if r.Modulus != 0 {
		m["modulus"] = r.Modulus
	}
	return m
}

func readPodMonitor(t *testing.T) podMonitor {
	t.Helper()
	b, err := os.ReadFile("podmonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var pm podMonitor
		if err := yaml.Unmarshal(doc, &pm); err != nil {
			t.Fatalf("podmonitor.yaml: %v", err)
		}
		if pm.Kind == "PodMonitor" {
			if len(pm.Spec.PodMetricsEndpoints) != 1 {
				t.Fatalf("PodMonitor has %d endpoints; this test reads one", len(pm.Spec.PodMetricsEndpoints))
			}
			return pm
		}
	}
	t.Fatal("podmonitor.yaml holds no PodMonitor")
	return podMonitor{}
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// operatorScrapeConfig is the scrape job the Prometheus Operator generates
// for endpoint 0 of pm (pkg/prometheus/promcfg.go, generatePodMonitorConfig;
// its golden files, e.g. testdata/EnforcedNamespaceLabelPodMonitor_Expected
// .golden): the selector and port keeps, namespace, container, pod, job and
// endpoint from discovery, then the PodMonitor's own relabelings, then
// sharding. Two stand-ins, neither of which touches labels: file_sd holds
// the discovery labels kubernetes_sd_configs (role: pod) would produce, and
// the test endpoint serves plain HTTP where the PodMonitor says https.
func operatorScrapeConfig(pm podMonitor, sdFile string) map[string]any {
	ep := pm.Spec.PodMetricsEndpoints[0]
	var rc []map[string]any
	rc = append(rc, map[string]any{"source_labels": []string{"job"}, "target_label": "__tmp_prometheus_job_name"})
	keys := make([]string, 0, len(pm.Spec.Selector.MatchLabels))
	for k := range pm.Spec.Selector.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := invalidLabelChars.ReplaceAllString(k, "_")
		rc = append(rc, map[string]any{"action": "keep",
			"source_labels": []string{"__meta_kubernetes_pod_label_" + s, "__meta_kubernetes_pod_labelpresent_" + s},
			"regex":         "(" + pm.Spec.Selector.MatchLabels[k] + ");true"})
	}
	rc = append(rc,
		map[string]any{"action": "drop", "source_labels": []string{"__meta_kubernetes_pod_phase"}, "regex": "(Failed|Succeeded)"},
		map[string]any{"action": "keep", "source_labels": []string{"__meta_kubernetes_pod_container_port_name"}, "regex": ep.Port},
		map[string]any{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_pod_container_name"}, "target_label": "container"},
		map[string]any{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"},
		map[string]any{"target_label": "job", "replacement": pm.Metadata.Namespace + "/" + pm.Metadata.Name},
		map[string]any{"target_label": "endpoint", "replacement": ep.Port},
	)
	for _, r := range ep.Relabelings {
		rc = append(rc, r.promRelabel())
	}
	rc = append(rc,
		map[string]any{"source_labels": []string{"__address__"}, "target_label": "__tmp_hash", "modulus": 1, "action": "hashmod"},
		map[string]any{"source_labels": []string{"__tmp_hash"}, "regex": "0", "action": "keep"},
	)
	job := map[string]any{
		"job_name":        fmt.Sprintf("podMonitor/%s/%s/0", pm.Metadata.Namespace, pm.Metadata.Name),
		"honor_labels":    ep.HonorLabels,
		"scrape_interval": "1s",
		"metrics_path":    "/metrics",
		"file_sd_configs": []map[string]any{{"files": []string{sdFile}, "refresh_interval": "1s"}},
		"relabel_configs": rc,
	}
	if len(ep.MetricRelabelings) > 0 {
		var mrc []map[string]any
		for _, r := range ep.MetricRelabelings {
			mrc = append(mrc, r.promRelabel())
		}
		job["metric_relabel_configs"] = mrc
	}
	return map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"scrape_configs": []any{job},
	}
}

// agentEndpoint serves the agent's real collector having measured two
// pods: shop/gateway-0 (opted in, throttled) and batch/tar-0 (not).
func agentEndpoint(t *testing.T) string {
	t.Helper()
	c := agentmetrics.New(host.New(t.TempDir()))
	c.Measured(&measure.Result{AllThrottling: []v1alpha1.PodThrottling{
		{Namespace: "shop", Name: "gateway-0", OptedIn: true, Periods: 600, Throttled: 120},
		{Namespace: "batch", Name: "tar-0", Periods: 600, Throttled: 300},
	}})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// runPrometheus starts Debian's prometheus (the package promtool comes
// in) on loopback with cfg and returns its address.
func runPrometheus(t *testing.T, dir string, cfg map[string]any) string {
	t.Helper()
	bin := filepath.Join(filepath.Dir(promtool(t)), "prometheus")
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("prometheus"); err != nil {
			t.Fatal("promtool without prometheus: install the Debian package prometheus (make deps)")
		}
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
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
			t.Logf("scrape config:\n%s\nprometheus log:\n%s", b, log.String())
		}
	})
	return addr
}

// querySeries polls Prometheus until query returns at least min series.
func querySeries(t *testing.T, addr, query string, min int) []map[string]string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var out struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
				} `json:"result"`
			} `json:"data"`
		}
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(query))
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
		}
		if err == nil && len(out.Data.Result) >= min {
			series := make([]map[string]string, 0, len(out.Data.Result))
			for _, r := range out.Data.Result {
				series = append(series, r.Metric)
			}
			return series
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %s: %d series after 60s (want %d), last error %v", query, len(out.Data.Result), min, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// seriesSelector writes labels as a series for promtool's input_series.
func seriesSelector(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+strconv.Quote(labels[k]))
	}
	return labels["__name__"] + "{" + strings.Join(parts, ",") + "}"
}

// TestPodSeriesSurviveOperatorRelabelling scrapes the agent's real
// collector with the job the Prometheus Operator generates from
// podmonitor.yaml, run by a real Prometheus, and then runs the alert rules
// with promtool over exactly the series that came out. The operator sets
// namespace and pod to the agent pod's; the measured pod's identity must
// survive next to them, and LatencyTierOptedInPodThrottled must name the
// measured pod, not the agent. It failed while the agent labelled pods
// namespace/pod: they came out as exported_namespace/exported_pod and the
// alert grouped by the agent pod.
func TestPodSeriesSurviveOperatorRelabelling(t *testing.T) {
	dir := t.TempDir()
	pm := readPodMonitor(t)
	sd := []map[string]any{{
		"targets": []string{agentEndpoint(t)},
		"labels": map[string]string{
			"__meta_kubernetes_namespace":                                    agentNamespace,
			"__meta_kubernetes_pod_name":                                     agentPod,
			"__meta_kubernetes_pod_node_name":                                agentNode,
			"__meta_kubernetes_pod_phase":                                    "Running",
			"__meta_kubernetes_pod_container_name":                           "agent",
			"__meta_kubernetes_pod_container_port_name":                      "metrics",
			"__meta_kubernetes_pod_label_app_kubernetes_io_name":             "latencytier",
			"__meta_kubernetes_pod_labelpresent_app_kubernetes_io_name":      "true",
			"__meta_kubernetes_pod_label_app_kubernetes_io_component":        "agent",
			"__meta_kubernetes_pod_labelpresent_app_kubernetes_io_component": "true",
		},
	}}
	sdFile := filepath.Join(dir, "targets.json")
	b, _ := json.Marshal(sd)
	if err := os.WriteFile(sdFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := runPrometheus(t, dir, operatorScrapeConfig(pm, sdFile))

	// The target itself: the labels the agent-down alert joins on.
	up := querySeries(t, addr, `up`, 1)
	if u := up[0]; u["node"] != agentNode || u["component"] != "agent" || u["namespace"] != agentNamespace || u["pod"] != agentPod {
		t.Errorf("up = %v: want node %s, component agent, the agent pod's namespace and pod", u, agentNode)
	}

	series := querySeries(t, addr, `{__name__=~"latencytier_pod_.*"}`, 6)
	for _, s := range series {
		for k := range s {
			if strings.HasPrefix(k, "exported_") {
				t.Errorf("%s: label %s: a label of the agent's collides with one the scrape sets", seriesSelector(s), k)
			}
		}
		if s["pod_namespace"] == "" || s["pod_name"] == "" || s["node"] != agentNode {
			t.Errorf("%s: no measured pod (pod_namespace, pod_name) or node", seriesSelector(s))
		}
	}
	if t.Failed() {
		return
	}

	// The rules over those series, in promtool: shop/gateway-0 throttled in
	// 20% of its periods fires with its own identity; batch/tar-0 (not
	// opted in, 50%) does not.
	values := map[string]map[string]string{
		"latencytier_pod_cfs_periods_total":       {"gateway-0": "0+600x30", "tar-0": "0+600x30"},
		"latencytier_pod_throttled_periods_total": {"gateway-0": "0+120x30", "tar-0": "0+300x30"},
		"latencytier_pod_throttled_seconds_total": {"gateway-0": "0x30", "tar-0": "0x30"},
	}
	var inputs []map[string]string
	for _, s := range series {
		inputs = append(inputs, map[string]string{"series": seriesSelector(s), "values": values[s["__name__"]][s["pod_name"]]})
	}
	slices.SortFunc(inputs, func(a, b map[string]string) int { return strings.Compare(a["series"], b["series"]) })
	rules, err := filepath.Abs("latencytier.rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	test := map[string]any{
		"rule_files":          []string{rules},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval":     "1m",
			"input_series": inputs,
			"alert_rule_test": []any{map[string]any{
				"alertname": "LatencyTierOptedInPodThrottled",
				"eval_time": "20m",
				"exp_alerts": []any{map[string]any{
					"exp_labels": map[string]string{"severity": "warning", "node": agentNode,
						"pod_namespace": "shop", "pod_name": "gateway-0"},
					"exp_annotations": map[string]string{
						"summary": "Opted-in pod shop/gateway-0 is CFS-throttled",
						"description": "20% of the CFS periods of shop/gateway-0 on node " + agentNode +
							" were throttled over 5 minutes although the pod opted into quota removal.",
						"runbook_url": runbookURL("LatencyTierOptedInPodThrottled"),
					},
				}},
			}},
		}},
	}
	b, err = yaml.Marshal(test)
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "relabelled.test.yaml")
	if err := os.WriteFile(testFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("promtool input (as scraped through the operator's relabelling):\n%s", b)
	runPromtool(t, "test", "rules", testFile)
}

// TestManagerNodeLabelSurvivesOperatorRelabelling: the manager's per-node
// series (latencytier_node_selected, latencytier_node_last_report_timestamp_seconds)
// carry the node they describe in a label named node. The PodMonitor sets
// node from the scraped pod's node, which is right for an agent and wrong
// for the manager: with honorLabels false the manager's own node label came
// out as exported_node and node named the manager pod's node, so the
// agent-down and stale-status alerts joined on the wrong node. It failed
// while the node relabelling applied to every pod.
func TestManagerNodeLabelSurvivesOperatorRelabelling(t *testing.T) {
	dir := t.TempDir()
	pm := readPodMonitor(t)
	reg := prometheus.NewRegistry()
	selected := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "latencytier_node_selected", Help: "x"}, []string{"node", "profile"})
	selected.WithLabelValues("w-7", "trading").Set(1)
	reg.MustRegister(selected)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	sd := []map[string]any{{
		"targets": []string{strings.TrimPrefix(srv.URL, "http://")},
		"labels": map[string]string{
			"__meta_kubernetes_namespace":                                    agentNamespace,
			"__meta_kubernetes_pod_name":                                     "latencytier-manager-5d9f",
			"__meta_kubernetes_pod_node_name":                                "cp-0",
			"__meta_kubernetes_pod_phase":                                    "Running",
			"__meta_kubernetes_pod_container_name":                           "manager",
			"__meta_kubernetes_pod_container_port_name":                      "metrics",
			"__meta_kubernetes_pod_label_app_kubernetes_io_name":             "latencytier",
			"__meta_kubernetes_pod_labelpresent_app_kubernetes_io_name":      "true",
			"__meta_kubernetes_pod_label_app_kubernetes_io_component":        "manager",
			"__meta_kubernetes_pod_labelpresent_app_kubernetes_io_component": "true",
		},
	}}
	sdFile := filepath.Join(dir, "targets.json")
	b, _ := json.Marshal(sd)
	if err := os.WriteFile(sdFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := runPrometheus(t, dir, operatorScrapeConfig(pm, sdFile))
	s := querySeries(t, addr, `latencytier_node_selected`, 1)[0]
	if s["node"] != "w-7" || s["exported_node"] != "" || s["component"] != "manager" {
		t.Errorf("%s: want node w-7 (the node it describes), no exported_node, component manager", seriesSelector(s))
	}
}
