package metrics

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/internal/metricsauth"
)

const namespace = "latencytier-system"

// TestAgentEndpointServesAuthorizedScrapers serves the Collector as the
// agent does (its controller-runtime metrics server with metricsauth.ServerOptions, on
// controller-runtime's registry), with the server's own API calls made as
// the agent's service account bound to exactly config/agent/role.yaml: the
// TokenReview and SubjectAccessReview behind every scrape are the agent's
// to create. Only a token bound to latencytier-metrics-reader gets metrics.
func TestAgentEndpointServesAuthorizedScrapers(t *testing.T) {
	c, cfg := startAPI(t)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config/agent/service_account.yaml", "config/agent/role.yaml", "config/rbac/metrics_reader_role.yaml"} {
		applyManifest(t, c, filepath.Join("..", "..", f))
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "latencytier-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: namespace}},
	}
	if err := c.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	scraper, stranger := saToken(t, c, cfg, "scraper"), saToken(t, c, cfg, "stranger")

	col := New(host.New(t.TempDir()))
	if err := ctrlmetrics.Registry.Register(col); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrlmetrics.Registry.Unregister(col) })
	col.Measured(&measure.Result{Hists: map[string]*measure.Hist{measure.ClassNode: hist(1500, 1500, 300_000)}})

	asAgent := rest.CopyConfig(cfg)
	asAgent.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":latencytier-agent",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	opts, err := metricsauth.ServerOptions(freeAddr(t), true, "")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + serve(t, opts, asAgent) + "/metrics"

	if code, _ := scrape(t, url, ""); code != http.StatusUnauthorized {
		t.Errorf("without a token: HTTP %d, want 401", code)
	}
	if code, body := scrape(t, url, stranger); code != http.StatusForbidden {
		t.Errorf("as a service account without the reader role: HTTP %d, want 403: %.200s", code, body)
	}
	wantLines := []string{
		`latencytier_node_runqueue_latency_seconds_bucket{class="node",le="1e-06"} 0`,
		`latencytier_node_runqueue_latency_seconds_bucket{class="node",le="2e-06"} 2`,
		`latencytier_node_runqueue_latency_seconds_bucket{class="node",le="0.000256"} 2`,
		`latencytier_node_runqueue_latency_seconds_bucket{class="node",le="0.000512"} 3`,
		`latencytier_node_runqueue_latency_seconds_bucket{class="node",le="+Inf"} 3`,
		`latencytier_node_runqueue_latency_seconds_count{class="node"} 3`,
		`latencytier_journal_entries 0`,
	}
	var last string
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := scrape(t, url, scraper)
		last = fmt.Sprintf("HTTP %d: %.300s", code, body)
		if code == http.StatusOK {
			for _, l := range wantLines {
				if !strings.Contains(body, l+"\n") {
					t.Errorf("scrape lacks %q", l)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the metrics reader was not served: %s", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startAPI starts envtest's kube-apiserver and etcd.
func startAPI(t *testing.T) (client.Client, *rest.Config) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		home, _ := os.UserHomeDir()
		assets = filepath.Join(home, ".cache", "latencytier", "k8s", "v1.37.2")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		t.Fatalf("no envtest binaries in %s: run make test (hack/k8s-binaries.sh builds them)", assets)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// applyManifest creates every object of a multi-document YAML file.
func applyManifest(t *testing.T, c client.Client, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(context.Background(), &u); err != nil {
			t.Fatalf("%s: creating %s %s: %v", path, u.GetKind(), u.GetName(), err)
		}
	}
}

// saToken creates service account name and returns a token for it.
func saToken(t *testing.T, c client.Client, cfg *rest.Config, name string) string {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a token for %s: %v", name, err)
	}
	return tr.Status.Token
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serve starts a controller-runtime metrics server with o until the test
// ends and returns its address once it listens.
func serve(t *testing.T, o metricsserver.Options, cfg *rest.Config) string {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(o, cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := 0; ; i++ {
		conn, err := net.Dial("tcp", o.BindAddress)
		if err == nil {
			_ = conn.Close()
			return o.BindAddress
		}
		if i > 100 {
			t.Fatalf("metrics server not listening: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrape GETs url with an optional bearer token, not verifying the
// self-signed certificate.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test server
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
