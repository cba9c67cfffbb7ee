package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/api/v1alpha1"
)

// runArgs runs "kubectl latency ARGS" exactly as given (no --kubeconfig
// added) and returns stdout and stderr.
func runArgs(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
	root.SetArgs(args)
	err := root.Execute()
	t.Logf("$ kubectl latency %s\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String(), errOut.String(), err
}

type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name          string `json:"name"`
		ManagedFields []any  `json:"managedFields"`
	} `json:"metadata"`
	Items []object `json:"items"`
}

// TestOutputJSONAndYAML: -o json|yaml print the objects through
// cli-runtime's printers, each with its apiVersion and kind: status a List
// of the profile and its nodes (worst first), explain the LatencyNode, top
// the nodes in its order; jsonpath works as in kubectl get.
func TestOutputJSONAndYAML(t *testing.T) {
	out, err := run(t, "status", "gateway", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var l object
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("status -o json: %v", err)
	}
	var got []string
	for _, it := range l.Items {
		got = append(got, it.APIVersion+" "+it.Kind+" "+it.Metadata.Name)
	}
	const gv = "tuning.latencytier.io/v1alpha1"
	want := []string{gv + " LatencyProfile gateway", gv + " LatencyNode w-2", gv + " LatencyNode w-3", gv + " LatencyNode w-1"}
	if l.Kind != "List" || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("status -o json: kind %s, items %v; want a List of %v", l.Kind, got, want)
	}

	out, err = run(t, "explain", "w-2", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var n v1alpha1.LatencyNode
	if err := yaml.UnmarshalStrict([]byte(out), &n); err != nil {
		t.Fatalf("explain -o yaml: %v", err)
	}
	if n.Kind != "LatencyNode" || n.APIVersion != gv || n.Name != "w-2" || n.Status.Current == nil || len(n.ManagedFields) != 0 {
		t.Errorf("explain -o yaml: %s %s %s, current evidence %v, %d managed fields", n.APIVersion, n.Kind, n.Name, n.Status.Current, len(n.ManagedFields))
	}

	out, err = run(t, "top", "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		t.Fatal(err)
	}
	if out != "w-2 w-3 w-1" {
		t.Errorf("top -o jsonpath: %q, want the nodes highest p99 first", out)
	}
	if out, err = run(t, "top", "-o", "name"); err != nil || !strings.Contains(out, "latencynode.tuning.latencytier.io/w-2") {
		t.Errorf("top -o name: %q, %v", out, err)
	}
}

// TestOutputWide: -o wide adds columns to status and top.
func TestOutputWide(t *testing.T) {
	out, err := run(t, "status", "gateway", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`^PROFILE\s.*\sROLLOUT\s+CONFLICTED\s+STALE$`,
		`^gateway\s+False\s+3\s+1\s+1\s+1\s+1\.2ms\s+0\.2\s+RolledBack\s+0\s+0$`,
		`^  NODE\s.*\sSETTINGS\s+REVISION\s+POD-P99\s+CLASS$`,
		`^  w-1\s+Applied\s+400µs\s+80µs\s+0\.20×\s+Improved\s+-\s+1 Applied\s+gateway-7f9c\s+-\s+-$`,
		`^  w-2\s.*\s+gateway-7f9c\s+\S+\s+ext:scx_lavd$`,
		`^  w-3\s+Baseline\s.*\s-\s+-\s+-$`,
	} {
		if lineIndex(out, re) < 0 {
			t.Errorf("status -o wide: no line matches %s", re)
		}
	}
	out, err = run(t, "top", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	if lineIndex(out, `^NODE\s.*\sBUDGET\s+SOURCE\s+WINDOW\s+PSI-SOME10$`) < 0 || lineIndex(out, `^w-3\s.*\sSchedstat\s+30s\s+-$`) < 0 {
		t.Errorf("top -o wide: no SOURCE, WINDOW, PSI-SOME10 columns or no w-3 row with them")
	}
	if out, _ := run(t, "status", "gateway"); strings.Contains(out, "REVISION") {
		t.Error("status without -o wide prints the wide columns")
	}
}

// apiServer is an HTTP server that counts the requests it gets and
// answers each 503, standing where an API server would.
func apiServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// TestBadFlagsFailBeforeAnyRequest: a flag the command cannot use fails
// with an error naming it and no request reaches the API server. It
// failed while top checked --class after listing the nodes.
func TestBadFlagsFailBeforeAnyRequest(t *testing.T) {
	url, requests := apiServer(t)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"top", "--class", "Bogus"}, `--class must be Node, Isolated or Reserved, not "Bogus"`},
		{[]string{"status", "-o", "bogus"}, `--output "bogus": not one of wide, json, yaml`},
		{[]string{"top", "-o", "jsonpath={.items[*"}, `--output "jsonpath={.items[*"`},
		{[]string{"explain", "w-1", "-o", "wide"}, "this command has no wide table"},
		{[]string{"status", "-n", "default"}, "unknown shorthand flag: 'n'"},
		{[]string{"top", "--namespace", "default"}, "unknown flag: --namespace"},
		{[]string{"explain"}, "accepts 1 arg(s), received 0"},
		{[]string{"top", "-l", "zone in (a"}, `--selector "zone in (a": `},
		{[]string{"boot", "--selector", "=a"}, `--selector "=a": `},
		{[]string{"status", "-l", "team==="}, `--selector "team===": `},
		{[]string{"status", "gateway", "-l", "team=payments"}, `--selector "team=payments": give a PROFILE or a selector, not both`},
		{[]string{"top", "--sort-by", "latency"}, `--sort-by "latency": not a column; use one of node, profile, class, p50, p99,`},
		{[]string{"boot", "--sort-by", "p99"}, `--sort-by "p99": not a column; use one of node, profile, policy,`},
		{[]string{"explain", "w-1", "-w"}, "unknown shorthand flag: 'w'"},
		{[]string{"status", "--sort-by", "p99"}, "unknown flag: --sort-by"},
	} {
		_, stderr, err := runArgs(t, append([]string{"--server", url}, c.args...)...)
		if err == nil || !strings.Contains(err.Error()+stderr, c.says) {
			t.Errorf("%v: err %v, stderr %q; want an error saying %q", c.args, err, stderr, c.says)
		}
		if k := requests.Load(); k != 0 {
			t.Fatalf("%v: %d request(s) reached the API server before the flag was refused", c.args, k)
		}
	}
	// The server does count: a good command reaches it.
	if _, _, err := runArgs(t, "--server", url, "top", "--class", "Isolated"); err == nil || requests.Load() == 0 {
		t.Fatalf("top against the counting server: err %v, %d requests; the counter counts nothing", err, requests.Load())
	}
}

// TestVersion prints the plugin's version without a cluster.
func TestVersion(t *testing.T) {
	url, requests := apiServer(t)
	out, _, err := runArgs(t, "--server", url, "version")
	if err != nil || !regexp.MustCompile(`^kubectl-latency \S+ \(go[0-9.]+\S*, [a-z0-9]+/[a-z0-9]+\)\n$`).MatchString(out) || requests.Load() != 0 {
		t.Errorf("version: %q, %v, %d requests", out, err, requests.Load())
	}
	old := version
	version = "v1.2.3"
	defer func() { version = old }()
	if out, _, _ := runArgs(t, "version"); !strings.HasPrefix(out, "kubectl-latency v1.2.3 (") {
		t.Errorf("version with -X main.version=v1.2.3: %q", out)
	}
}

// complete runs cobra's completion request as the shell scripts (and
// kubectl's plugin completion) send it, returning the candidates.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	out, _, err := runArgs(t, append([]string{"__complete"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var words []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, ":") && l != "" {
			words = append(words, strings.SplitN(l, "\t", 2)[0])
		}
	}
	return words
}

// TestCompletion: subcommands, profile names for status, node names for
// explain (from the cluster the flags point at), --class and -o values.
func TestCompletion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{""}, "boot,completion,explain,help,status,top,version"},
		{[]string{"status", "--kubeconfig", kubeconfig, ""}, "gateway"},
		{[]string{"status", "--kubeconfig", kubeconfig, "gateway", ""}, ""},
		{[]string{"explain", "--kubeconfig", kubeconfig, "w-"}, "w-1,w-2,w-3"},
		{[]string{"explain", "--kubeconfig", kubeconfig, "w-2"}, "w-2"},
		{[]string{"top", "--class", ""}, "Node,Isolated,Reserved"},
	} {
		if got := strings.Join(complete(t, c.args...), ","); got != c.want {
			t.Errorf("complete %v = %q, want %q", c.args, got, c.want)
		}
	}
	got := complete(t, "status", "-o", "")
	for _, f := range []string{"wide", "json", "yaml", "jsonpath"} {
		if !strings.Contains(","+strings.Join(got, ",")+",", ","+f+",") {
			t.Errorf("complete status -o: %v, want %s among them", got, f)
		}
	}
	if out, _, err := runArgs(t, "completion", "bash"); err != nil || !strings.Contains(out, "__start_kubectl-latency") {
		t.Errorf("completion bash: %v, %d bytes", err, len(out))
	}
}

// TestEvidenceShowsDashesForEmptyValues: a window without pod evidence,
// action, revision, window or samples prints "-" for each, never an empty
// gap or "( samples)".
func TestEvidenceShowsDashesForEmptyValues(t *testing.T) {
	got := evidence(&v1alpha1.LatencyEvidence{})
	want := "p99 - (p50 -, max -, - samples) under - -, window - ending -; pods p99 -, throttled -"
	if got != want {
		t.Errorf("empty evidence:\n got %s\nwant %s", got, want)
	}
	full := evidence(&v1alpha1.LatencyEvidence{Action: v1alpha1.ActionApply, Revision: "gateway-7f9c",
		Window: &metav1.Duration{Duration: 30e9}, MeasuredAt: metav1.Unix(1767225600, 0),
		RunQueue:       v1alpha1.LatencySummary{Samples: 9, P50: &metav1.Duration{Duration: 6000}, P99: &metav1.Duration{Duration: 80000}},
		Pods:           &v1alpha1.LatencySummary{Samples: 3, P99: &metav1.Duration{Duration: 1e6}},
		ThrottledRatio: "0.2"})
	if want := "p99 80µs (p50 6µs, max -, 9 samples) under Apply gateway-7f9c, window 30s ending 2026-01-01T00:00:00Z; pods p99 1ms (3 samples), throttled 0.2"; full != want {
		t.Errorf("evidence:\n got %s\nwant %s", full, want)
	}
	var out bytes.Buffer
	n := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "w-9"}, Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionBaseline}}
	n.Status.Baseline = &v1alpha1.LatencyEvidence{Action: v1alpha1.ActionBaseline}
	if err := explain(&out, n, verdicts{}); err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`\(\s|\s\)|\S  \(|, ,`).MatchString(strings.ReplaceAll(out.String(), "\n\n", "\n")) {
		t.Errorf("explain prints an empty value as a gap:\n%s", out.String())
	}
}

// blankCells names the columns of header that row leaves empty: tabwriter
// starts every cell of a column where its header starts, so a blank there
// (or a row that ends before it) is a value printed as nothing. The
// indented sub-rows under a node (its failing settings) are not checked:
// their empty cells are layout.
func blankCells(header, row string) []string {
	var blank []string
	for _, m := range regexp.MustCompile(`\S+`).FindAllStringIndex(header, -1) {
		if m[0] >= len(row) || row[m[0]] == ' ' {
			blank = append(blank, header[m[0]:m[1]])
		}
	}
	return blank
}

// TestTablesShowDashesForEmptyValues: a profile and a node that report
// little (no rollout, no budget, settings and conditions without
// messages, no evidence) print "-" in every column of kubectl latency
// status (plain and -o wide) and explain, never an empty cell. Before,
// explain's conditions and settings left REASON/MESSAGE and STATE blank.
func TestTablesShowDashesForEmptyValues(t *testing.T) {
	p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "sparse"}}
	n := v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "w-1"}, Spec: v1alpha1.LatencyNodeSpec{Profile: "sparse", Action: v1alpha1.ActionApply}}
	n.Status.Settings = []v1alpha1.SettingResult{
		{Setting: "sysctl/kernel.sched_autogroup_enabled", State: v1alpha1.SettingApplied},
		{Setting: "irq/24", State: v1alpha1.SettingFailed},
	}
	n.Status.Conditions = []metav1.Condition{{Type: v1alpha1.NodeApplied, Status: metav1.ConditionFalse, Reason: "SettingsFailed"}}

	check := func(what, out string, header *regexp.Regexp) {
		t.Helper()
		lines := strings.Split(out, "\n")
		for i, l := range lines {
			if !header.MatchString(l) {
				continue
			}
			for _, row := range lines[i+1:] {
				if strings.TrimSpace(row) == "" || strings.HasSuffix(row, ":") || strings.HasPrefix(row, "    ") ||
					strings.HasPrefix(strings.TrimSpace(row), "(") || regexp.MustCompile(`^\s*[A-Z][A-Z-]+\s{2}`).MatchString(row) {
					break
				}
				if b := blankCells(l, row); len(b) > 0 {
					t.Errorf("%s: columns %v empty in %q\n%s", what, b, row, out)
				}
			}
			return
		}
		t.Fatalf("%s: no header %s in\n%s", what, header, out)
	}
	for _, wide := range []bool{false, true} {
		var out bytes.Buffer
		if err := printProfile(&out, p, []v1alpha1.LatencyNode{n}, wide, false); err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("status (wide %v)", wide)
		check(what+" profile", out.String(), regexp.MustCompile(`^PROFILE\s`))
		check(what+" nodes", out.String(), regexp.MustCompile(`^  NODE\s`))
	}
	var out bytes.Buffer
	if err := explain(&out, &n, verdicts{}); err != nil {
		t.Fatal(err)
	}
	check("explain settings", out.String(), regexp.MustCompile(`^  SETTING\s`))
	// The conditions table has no header: each line holds type, status,
	// reason and message.
	sec := out.String()[strings.Index(out.String(), "Conditions:"):]
	line := strings.Split(sec, "\n")[1]
	if f := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1); len(f) != 4 {
		t.Errorf("explain condition %q has %d cells, want type, status, reason and message (- when empty)", line, len(f))
	}
}
