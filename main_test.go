package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"latencytier.io/latencytier/internal/buildinfo"
	"latencytier.io/latencytier/internal/cli"
)

// run runs the binary's command tree with args, as main does.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&errOut)
	code = cli.Execute(context.Background(), root, args, &errOut)
	return code, out.String(), errOut.String()
}

// commands lists every command path of the tree ("agent plan", ...).
func commands(c *cobra.Command) [][]string {
	var out [][]string
	for _, sub := range c.Commands() {
		if sub.Hidden || sub.Name() == "help" {
			continue
		}
		out = append(out, []string{sub.Name()})
		for _, p := range commands(sub) {
			out = append(out, append([]string{sub.Name()}, p...))
		}
	}
	return out
}

func TestHelpExitsZero(t *testing.T) {
	paths := commands(newRoot())
	for _, want := range [][]string{{"manager"}, {"agent"}, {"agent", "plan"}, {"agent", "apply"}, {"agent", "revert"},
		{"agent", "measure"}, {"uninstall"}, {"version"}} {
		if !slices.ContainsFunc(paths, func(p []string) bool { return slices.Equal(p, want) }) {
			t.Errorf("no command %q in %q", want, paths)
		}
	}
	for _, p := range append(paths, nil) {
		for _, h := range []string{"-h", "--help"} {
			code, out, errOut := run(t, append(slices.Clone(p), h)...)
			if code != cli.ExitOK || !strings.Contains(out, "Usage:\n  latencytier "+strings.Join(p, " ")) || errOut != "" {
				t.Errorf("latencytier %s %s: exit %d, stdout %q, stderr %q; want 0 and the usage on stdout", strings.Join(p, " "), h, code, out, errOut)
			}
		}
	}
	if code, out, _ := run(t, "help", "agent", "measure"); code != 0 || !strings.Contains(out, "--duration") {
		t.Errorf("help agent measure: exit %d, %q", code, out)
	}
	if code, out, _ := run(t, "manager", "-h"); code != 0 || !strings.Contains(out, "--node-unreachable-timeout") || !strings.Contains(out, "--log-format") {
		t.Errorf("manager -h lists no flags: %q", out)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"manager", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"agent", "--bogus=1"}, "unknown flag: --bogus"},
		{[]string{"agent", "measure", "--durration=1s"}, "unknown flag: --durration"},
		{[]string{"uninstall", "--timeout=soon"}, `invalid argument "soon" for "--timeout"`},
		{[]string{"agent", "plon"}, `unknown command "plon" for "latencytier agent"`},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "latencytier"`},
		{[]string{"manager", "extra"}, `unexpected argument "extra"`},
		{[]string{"manager", "--node-unreachable-timeout=0s"}, "--node-unreachable-timeout must be positive"},
		{[]string{"agent", "--log-format=xml", "--node-name=n"}, `"xml" is not a log format`},
		{[]string{"agent", "apply", "--host-root", t.TempDir()}, "--node-spec is required"},
		{nil, "missing subcommand"},
	} {
		code, out, errOut := run(t, tt.args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "--help' for usage") {
			t.Errorf("latencytier %q: exit %d, stderr %q, stdout %q; want 2 naming %q", tt.args, code, errOut, out, tt.want)
		}
	}
	// A run error is not a usage error.
	if code, _, errOut := run(t, "agent", "plan", "--host-root", t.TempDir(), "--node-spec", "/no/such/file"); code != cli.ExitError || !strings.Contains(errOut, "no such file") {
		t.Errorf("agent plan with a missing file: exit %d, %q; want 1", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if code, out, _ := run(t, args...); code != 0 || out != version+"\n" {
			t.Errorf("%q: exit %d, %q", args, code, out)
		}
	}
}

// TestManifestArgsParse parses, with the binary's own command tree, the
// command line of every latencytier container in the manifests and the
// chart (rendered by Helm's engine with the values the e2e and the local
// cluster set): a renamed or removed flag fails here, not in a cluster.
func TestManifestArgsParse(t *testing.T) {
	var lines [][]string
	for _, f := range []string{"config/manager/manager.yaml", "config/agent/daemonset.yaml"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, containerArgs(t, f, b)...)
	}
	ch, err := loader.Load("charts/latencytier")
	if err != nil {
		t.Fatal(err)
	}
	for _, vals := range []map[string]any{
		{},
		// hack/e2e.sh's upgrade, hack/local-cluster's install, the uninstall hook.
		{"agent": map[string]any{"logLevel": 1, "extraArgs": []any{"--resync=10s", "--log-format=text"}, "kubeletDir": "/tmp/kubelet"},
			"image": map[string]any{"pullPolicy": "Never"}, "manager": map[string]any{"hostNetwork": true, "replicas": 1},
			"uninstall": map[string]any{"revertNodes": true}, "metrics": map[string]any{"port": 0}},
		// A verifiable metrics certificate: --metrics-cert-dir on the manager and the agents.
		{"metrics": map[string]any{"tls": map[string]any{"secretName": "latencytier-metrics-tls"}}},
	} {
		v, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "latencytier", Namespace: "latencytier-system", IsInstall: true}, chartutil.DefaultCapabilities)
		if err != nil {
			t.Fatal(err)
		}
		out, err := engine.Render(ch, v)
		if err != nil {
			t.Fatal(err)
		}
		for name, text := range out {
			if strings.HasSuffix(name, ".yaml") {
				lines = append(lines, containerArgs(t, name, []byte(text))...)
			}
		}
	}
	// What scripts pass: hack/bench/lib.sh (Go-flag style, still accepted),
	// the Makefile's undeploy, hack/scale/fleetsim's manager.
	lines = append(lines, []string{"agent", "measure", "-duration", "60s"}, []string{"agent", "apply", "--node-spec", "spec.json"},
		[]string{"agent", "revert"}, []string{"uninstall", "--timeout=15m"},
		[]string{"manager", "--namespace=latencytier-system", "--metrics-bind-address=0", "--health-probe-bind-address=0",
			"--kubeconfig=k", "--leader-elect=false", "--pprof-bind-address=127.0.0.1:6060", "--profile-status-interval=5s"})
	seen := map[string]int{}
	for _, args := range lines {
		root := newRoot()
		cmd, rest, err := root.Find(cli.GoStyle(root, args))
		if err != nil || cmd == root || !cmd.Runnable() {
			t.Errorf("%q: no subcommand (%v)", args, err)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("%q: %v", args, err)
			continue
		}
		if n := cmd.Flags().NArg(); n > 0 {
			t.Errorf("%q: %d stray argument(s) %q", args, n, cmd.Flags().Args())
		}
		seen[cmd.Name()]++
	}
	for _, want := range []string{"manager", "agent", "uninstall"} {
		if seen[want] == 0 {
			t.Errorf("no %s command line found in the manifests (found %v)", want, seen)
		}
	}
}

// containerArgs returns the args of every latencytier container in a
// multi-document YAML.
func containerArgs(t *testing.T, name string, b []byte) [][]string {
	t.Helper()
	type container struct {
		Image string   `json:"image"`
		Args  []string `json:"args"`
	}
	var out [][]string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var doc struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers     []container `json:"containers"`
						InitContainers []container `json:"initContainers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s := doc.Spec.Template.Spec
		for _, c := range append(s.Containers, s.InitContainers...) {
			if strings.Contains(c.Image, "latencytier") && len(c.Args) > 0 {
				out = append(out, c.Args)
			}
		}
	}
}

// TestOneLogFormat runs the manager's and the agent's log setup with the
// same flags and checks that their lines have one structure: the same keys
// and level names in JSON, the same columns in text, the same verbosity.
func TestOneLogFormat(t *testing.T) {
	// Each command logs "Parsed flags" at V(1), then fails on the missing
	// kubeconfig before it reaches a cluster.
	hostRoot := t.TempDir()
	cmds := map[string][]string{
		"manager": {"manager", "--kubeconfig=/nonexistent", "--health-probe-bind-address=0", "--metrics-bind-address=0"},
		"agent": {"agent", "--node-name=n", "--host-root=" + hostRoot, "--kubeconfig=/nonexistent",
			"--health-probe-bind-address=0", "--no-measure"},
	}
	debugLine := func(t *testing.T, name string, extra ...string) (string, bool) {
		t.Helper()
		code, _, errOut := run(t, append(slices.Clone(cmds[name]), extra...)...)
		if code != cli.ExitError || !strings.Contains(errOut, "nonexistent") {
			t.Fatalf("%s %q: exit %d, %q; want 1 for the missing kubeconfig", name, extra, code, errOut)
		}
		for _, l := range strings.Split(errOut, "\n") {
			if strings.Contains(l, "Parsed flags") {
				return l, true
			}
		}
		return "", false
	}
	text := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z\tDEBUG\tParsed flags\t\{"`)
	for _, name := range []string{"manager", "agent"} {
		t.Run(name, func(t *testing.T) {
			for _, quiet := range [][]string{nil, {"--v=0"}, {"--log-level=info"}, {"--log-level=error", "--log-format=text"}} {
				if l, ok := debugLine(t, name, quiet...); ok {
					t.Errorf("%q logged a V(1) line: %s", quiet, l)
				}
			}
			for _, verbose := range [][]string{{"--v=1"}, {"-v", "1"}, {"--log-level=debug"}, {"--log-level=2"}} {
				l, ok := debugLine(t, name, verbose...)
				var m map[string]any
				if !ok || json.Unmarshal([]byte(l), &m) != nil {
					t.Fatalf("%q: no JSON V(1) line (%q)", verbose, l)
				}
				if m["level"] != "debug" || m["msg"] != "Parsed flags" || !regexp.MustCompile(`^\d{4}-\d\d-\d\dT`).MatchString(m["ts"].(string)) {
					t.Errorf("%q: line %s; want level debug, msg and an RFC 3339 ts", verbose, l)
				}
				if _, ok := m["kubeconfig"]; !ok {
					t.Errorf("%q: line %s lacks its key/value pairs", verbose, l)
				}
			}
			if l, ok := debugLine(t, name, "--v=1", "--log-format=text"); !ok || !text.MatchString(l) {
				t.Errorf("text format: %q; want time, level, message and JSON fields in tab-separated columns", l)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(hostRoot, "var", "lib", "latencytier")); err != nil {
		t.Logf("agent state dir: %v", err)
	}
}

// TestBuildInfoMetric: the manager and the agent, before they run, register
// latencytier_build_info with their role and the stamped version in the
// registry their metrics servers serve.
func TestBuildInfoMetric(t *testing.T) {
	root := newRoot()
	for _, role := range []string{"manager", "agent"} {
		cmd, _, err := root.Find([]string{role})
		if err != nil || cmd.PreRunE == nil {
			t.Fatalf("%s: %v, PreRunE set %v", role, err, cmd.PreRunE != nil)
		}
		if err := cmd.PreRunE(cmd, nil); err != nil {
			t.Fatalf("%s: %v", role, err)
		}
	}
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != buildinfo.MetricName {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["version"] != version || l["goversion"] != runtime.Version() || m.GetGauge().GetValue() != 1 {
				t.Errorf("%s%v = %g, want version %q, goversion %q, 1", buildinfo.MetricName, l, m.GetGauge().GetValue(), version, runtime.Version())
			}
			roles[l["role"]] = true
		}
	}
	if !roles["manager"] || !roles["agent"] || len(roles) != 2 {
		t.Errorf("%s roles %v, want manager and agent", buildinfo.MetricName, roles)
	}
}
