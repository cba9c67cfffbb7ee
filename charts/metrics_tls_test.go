package charts

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// podSpec is the pod template spec of a Deployment or DaemonSet.
func podSpec(obj map[string]any) map[string]any {
	return obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
}

// certDirWiring says how a workload's first container gets the metrics
// certificate: its --metrics-cert-dir argument, the mount of volume
// metrics-tls and the Secret that volume names ("" for each absent).
func certDirWiring(obj map[string]any) (arg, mount, secret string) {
	spec := podSpec(obj)
	c := spec["containers"].([]any)[0].(map[string]any)
	for _, a := range c["args"].([]any) {
		if s := fmt.Sprint(a); strings.HasPrefix(s, "--metrics-cert-dir=") {
			arg = strings.TrimPrefix(s, "--metrics-cert-dir=")
		}
	}
	mounts, _ := c["volumeMounts"].([]any)
	for _, m := range mounts {
		if m := m.(map[string]any); m["name"] == "metrics-tls" && m["readOnly"] == true {
			mount = fmt.Sprint(m["mountPath"])
		}
	}
	vols, _ := spec["volumes"].([]any)
	for _, v := range vols {
		if v := v.(map[string]any); v["name"] == "metrics-tls" {
			secret = fmt.Sprint(v["secret"].(map[string]any)["secretName"])
		}
	}
	return arg, mount, secret
}

// tlsConfig is the PodMonitor's only endpoint's tlsConfig.
func tlsConfig(t *testing.T, objs map[string]map[string]any) map[string]any {
	t.Helper()
	pm, ok := objs["PodMonitor/tier/latencytier"]
	if !ok {
		t.Fatalf("no PodMonitor in %v", keys(objs))
	}
	return pm["spec"].(map[string]any)["podMetricsEndpoints"].([]any)[0].(map[string]any)["tlsConfig"].(map[string]any)
}

var workloads = []string{"Deployment/tier/latencytier-manager", "DaemonSet/tier/latencytier-agent", "DaemonSet/tier/latencytier-agent-hostpid"}

// TestChartMetricsTLS: with metrics.tls (a Secret of the user's, or a
// cert-manager Certificate) the manager and both agent DaemonSets mount the
// Secret where --metrics-cert-dir points, and the PodMonitor verifies with
// its ca.crt and the certificate's name instead of skipping verification;
// by default nothing is mounted and the PodMonitor says insecureSkipVerify.
// Before metrics.tls the schema refused the values.
func TestChartMetricsTLS(t *testing.T) {
	base := append([]string{"template", "rel", chartDir, "-n", "tier", "--set", "monitoring.podMonitor.enabled=true"}, scrapeClassValues...)
	for _, c := range []struct {
		name                  string
		set                   []string
		secret, serverName    string
		wantCertificateIssuer string
	}{
		{"self-signed default", nil, "", "", ""},
		{"own Secret", []string{"metrics.tls.secretName=my-metrics-cert", "metrics.tls.serverName=metrics.example.org"},
			"my-metrics-cert", "metrics.example.org", ""},
		{"cert-manager", []string{"metrics.tls.certManager.issuerName=tier-ca", "metrics.tls.certManager.issuerKind=ClusterIssuer"},
			"latencytier-metrics-tls", "latencytier-metrics.tier.svc", "ClusterIssuer/tier-ca"},
	} {
		args := append([]string{}, base...)
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		objs := objects(t, "helm template", helm(t, args...))
		for _, key := range workloads {
			arg, mount, secret := certDirWiring(objs[key])
			if c.secret == "" {
				if arg != "" || mount != "" || secret != "" {
					t.Errorf("%s: %s has --metrics-cert-dir=%q, mount %q, Secret %q; want none", c.name, key, arg, mount, secret)
				}
				continue
			}
			if arg == "" || arg != mount || secret != c.secret {
				t.Errorf("%s: %s has --metrics-cert-dir=%q, metrics-tls mounted read-only at %q from Secret %q; want the dir mounted from %s",
					c.name, key, arg, mount, secret, c.secret)
			}
		}
		tc := tlsConfig(t, objs)
		if c.secret == "" {
			if tc["insecureSkipVerify"] != true || tc["ca"] != nil {
				t.Errorf("%s: tlsConfig %v, want insecureSkipVerify alone", c.name, tc)
			}
		} else {
			want := fmt.Sprintf("map[ca:map[secret:map[key:ca.crt name:%s]] serverName:%s]", c.secret, c.serverName)
			if got := fmt.Sprint(tc); got != want {
				t.Errorf("%s: tlsConfig %s, want %s", c.name, got, want)
			}
		}
		cert, ok := objs["Certificate/tier/latencytier-metrics"]
		if (c.wantCertificateIssuer != "") != ok {
			t.Errorf("%s: Certificate rendered %v, want %v", c.name, ok, c.wantCertificateIssuer != "")
		}
		if ok {
			spec := cert["spec"].(map[string]any)
			ref := spec["issuerRef"].(map[string]any)
			if got := fmt.Sprintf("%s/%s", ref["kind"], ref["name"]); got != c.wantCertificateIssuer ||
				spec["secretName"] != c.secret || fmt.Sprint(spec["dnsNames"]) != "["+c.serverName+"]" {
				t.Errorf("%s: Certificate spec %v, want issuer %s, Secret %s, name %s", c.name, spec, c.wantCertificateIssuer, c.secret, c.serverName)
			}
		}
	}

	// An agent without a metrics port has nothing to serve the cert with.
	objs := objects(t, "helm template", helm(t, append(base, "--set", "metrics.tls.secretName=s", "--set", "agent.metricsPort=0")...))
	if arg, mount, secret := certDirWiring(objs["DaemonSet/tier/latencytier-agent"]); arg+mount+secret != "" {
		t.Errorf("agent.metricsPort=0: agent still wired to the cert (%q %q %q)", arg, mount, secret)
	}
}

// TestChartMetricsTLSRefusals: contradictory TLS values fail the render
// with a message naming them, instead of a server silently self-signing.
func TestChartMetricsTLSRefusals(t *testing.T) {
	for _, c := range []struct {
		set  []string
		says string
	}{
		{[]string{"metrics.tls.secretName=a", "metrics.tls.certManager.issuerName=b"}, "set secretName or certManager.issuerName, not both"},
		{[]string{"metrics.tls.secretName=a", "metrics.secure=false"}, "needs metrics.secure=true"},
		{[]string{"metrics.tls.certManager.issuerKind=Vault"}, "value must be one of"},
		{[]string{"metrics.tls.secretName=Not_A_Name"}, "does not match pattern"},
		{[]string{"monitoring.podMonitor.enabled=true", "monitoring.podMonitor.scrapeClass=sa-token"}, "/monitoring/podMonitor/prometheusServiceAccount/name': minLength"},
	} {
		args := []string{"template", "rel", chartDir}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		if out := helmFails(t, args...); !strings.Contains(out, c.says) {
			t.Errorf("--set %v: want a refusal saying %q, got:\n%s", c.set, c.says, out)
		}
	}
}

// scrapeClassValues are what monitoring.podMonitor's default credentials,
// ScrapeClass, need: the scrape class and Prometheus' service account.
var scrapeClassValues = []string{"--set", "monitoring.podMonitor.scrapeClass=sa-token",
	"--set", "monitoring.podMonitor.prometheusServiceAccount.name=prometheus-k8s",
	"--set", "monitoring.podMonitor.prometheusServiceAccount.namespace=monitoring"}

// TestChartPodMonitorCredentials: short-lived credentials are the default
// path. With monitoring.podMonitor.credentials at its default, ScrapeClass,
// the chart renders no non-expiring token Secret and no scraper service
// account; the PodMonitor names the scrape class (whose token file is
// Prometheus' own rotated, projected token) and carries no authorization of
// its own, and latencytier-metrics-reader is bound to Prometheus' account.
// The long-lived token Secret comes only with the explicit
// credentials=LongLivedTokenSecret. Either way metrics.tls still gives the
// PodMonitor a CA to verify with. It failed before credentials existed:
// podMonitor.enabled=true alone rendered the non-expiring Secret.
func TestChartPodMonitorCredentials(t *testing.T) {
	for _, c := range []struct {
		name        string
		set         []string
		longLived   bool
		verifiedTLS bool
	}{
		{"default: scrape class", scrapeClassValues, false, false},
		{"default: scrape class, TLS by CA", append([]string{"--set", "metrics.tls.secretName=my-cert"}, scrapeClassValues...), false, true},
		{"opt-in: long-lived Secret", []string{"--set", "monitoring.podMonitor.credentials=LongLivedTokenSecret"}, true, false},
		{"opt-in: long-lived Secret, TLS by CA", []string{"--set", "monitoring.podMonitor.credentials=LongLivedTokenSecret",
			"--set", "metrics.tls.secretName=my-cert"}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := objects(t, "helm template", helm(t, append([]string{"template", "rel", chartDir, "-n", "tier",
				"--set", "monitoring.podMonitor.enabled=true"}, c.set...)...))
			_, secret := objs["Secret/tier/latencytier-metrics-token"]
			_, account := objs["ServiceAccount/tier/latencytier-metrics-scraper"]
			if secret != c.longLived || account != c.longLived {
				t.Errorf("token Secret rendered %v, scraper account %v; want %v", secret, account, c.longLived)
			}
			spec := objs["PodMonitor/tier/latencytier"]["spec"].(map[string]any)
			ep := spec["podMetricsEndpoints"].([]any)[0].(map[string]any)
			b := objs["ClusterRoleBinding/latencytier-metrics-scraper"]
			subjects := fmt.Sprintf("%v %v", b["subjects"], b["roleRef"].(map[string]any)["name"])
			if c.longLived {
				if spec["scrapeClass"] != nil || ep["authorization"] == nil {
					t.Errorf("PodMonitor scrapeClass %v, authorization %v: want the token Secret's", spec["scrapeClass"], ep["authorization"])
				}
				if subjects != "[map[kind:ServiceAccount name:latencytier-metrics-scraper namespace:tier]] latencytier-metrics-reader" {
					t.Errorf("scraper binding %s", subjects)
				}
			} else {
				if spec["scrapeClass"] != "sa-token" {
					t.Errorf("PodMonitor scrapeClass %v, want sa-token", spec["scrapeClass"])
				}
				if ep["authorization"] != nil {
					t.Errorf("PodMonitor endpoint has authorization %v, which would override the scrape class's", ep["authorization"])
				}
				if subjects != "[map[kind:ServiceAccount name:prometheus-k8s namespace:monitoring]] latencytier-metrics-reader" {
					t.Errorf("scraper binding %s", subjects)
				}
			}
			tls := tlsConfig(t, objs)
			if ca, _ := tls["ca"].(map[string]any); c.verifiedTLS != (ca != nil) || c.verifiedTLS == (tls["insecureSkipVerify"] == true) {
				t.Errorf("tlsConfig %v, want verified by CA: %v", tls, c.verifiedTLS)
			}
		})
	}
	for _, c := range []struct {
		set  []string
		says string
	}{
		{nil, "/monitoring/podMonitor/scrapeClass': minLength"},
		{[]string{"monitoring.podMonitor.credentials=LongLivedTokenSecret", "monitoring.podMonitor.scrapeClass=sa-token"}, "value must be ''"},
		{[]string{"monitoring.podMonitor.credentials=Secret"}, "value must be one of"},
	} {
		args := []string{"template", "rel", chartDir, "--set", "monitoring.podMonitor.enabled=true"}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		if out := helmFails(t, args...); !strings.Contains(out, c.says) {
			t.Errorf("--set %v: want a refusal saying %q, got:\n%s", c.set, c.says, out)
		}
	}
}

// TestKustomizeVerifiedTLSMatchesChart: the kustomize component
// config/prometheus/verified-tls, composed over config/default and
// config/prometheus, renders the manager, both agent DaemonSets and the
// PodMonitor exactly as the chart does with metrics.tls.secretName
// (config/default's layout, PodMonitor on), but for Helm's labels: the
// same certificate wiring whichever way one installs.
func TestKustomizeVerifiedTLSMatchesChart(t *testing.T) {
	want := objects(t, "kustomize build testdata/verified-tls",
		kustomize(t, filepath.Join("testdata", "verified-tls")))
	rendered := helm(t, append([]string{"template", "latencytier", chartDir, "--set", "monitoring.podMonitor.enabled=true",
		"--set", "monitoring.podMonitor.credentials=LongLivedTokenSecret",
		"--set", "metrics.tls.secretName=latencytier-metrics-tls"}, configDefaultLayout...)...)
	got := objects(t, "helm template", throughKustomize(t, rendered))
	for _, key := range []string{"Deployment/latencytier-system/latencytier-manager", "DaemonSet/latencytier-system/latencytier-agent",
		"DaemonSet/latencytier-system/latencytier-agent-hostpid", "PodMonitor/latencytier-system/latencytier"} {
		w, g := want[key], got[key]
		if w == nil || g == nil {
			t.Errorf("%s: in kustomize %v, in the chart %v", key, w != nil, g != nil)
			continue
		}
		dropHelmLabels(g)
		if key == "PodMonitor/latencytier-system/latencytier" {
			dropHelmLabels(w) // config/prometheus labels only its PodMonitor's name
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s differs between the chart and config/prometheus/verified-tls:\n%s", key, diff(t, w, g))
		}
		if key != "PodMonitor/latencytier-system/latencytier" {
			if arg, mount, secret := certDirWiring(w); arg == "" || arg != mount || secret != "latencytier-metrics-tls" {
				t.Errorf("%s: kustomize wiring %q %q %q", key, arg, mount, secret)
			}
		}
	}
}
