package controllers

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"latencytier.io/latencytier/internal/metricsauth"
)

// TestSecureMetricsNeedAnAuthorizedToken serves metrics as the manager does
// by default and asks them as an anonymous client, as a service account with
// no role, and as one bound to config/rbac's metrics-reader ClusterRole.
func TestSecureMetricsNeedAnAuthorizedToken(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	url := "https://" + serveMetrics(t, true) + "/metrics"
	if err := applyFile(ctx, "../config/rbac/metrics_reader_role.yaml"); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "latencytier-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: testNamespace}},
	}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, binding)
		_ = k8s.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "latencytier-metrics-reader"}})
	})
	scraper, stranger := saToken(t, "scraper"), saToken(t, "stranger")

	if code, _ := scrape(t, url, ""); code != http.StatusUnauthorized {
		t.Errorf("without a token: HTTP %d, want 401", code)
	}
	// A token the TokenReview rejects with an error is answered 500 by
	// controller-runtime's filter: refused all the same.
	if code, body := scrape(t, url, "not-a-token"); code == http.StatusOK || strings.Contains(body, "controller_runtime") {
		t.Errorf("with a forged token: HTTP %d, metrics served", code)
	}
	if code, _ := scrape(t, url, stranger); code != http.StatusForbidden {
		t.Errorf("as a service account without the role: HTTP %d, want 403", code)
	}
	eventually(t, "metrics for the metrics-reader", func() error {
		code, body := scrape(t, url, scraper)
		if code != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", code, body)
		}
		if !strings.Contains(body, `controller_runtime_reconcile_total{controller="latencyprofile"`) {
			return fmt.Errorf("no profile controller series in %d bytes", len(body))
		}
		return nil
	})
}

// TestInsecureMetricsServePlainHTTP: --metrics-secure=false, for local use.
func TestInsecureMetricsServePlainHTTP(t *testing.T) {
	needSuite(t)
	code, body := scrape(t, "http://"+serveMetrics(t, false)+"/metrics", "")
	if code != http.StatusOK || !strings.Contains(body, "controller_runtime_reconcile_total") {
		t.Fatalf("HTTP %d, %d bytes", code, len(body))
	}
}

// serveMetrics starts a metrics server with the manager's options on a free
// local port until the test ends, and returns its address once it listens.
func serveMetrics(t *testing.T, secure bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	hc, err := rest.HTTPClientFor(testEnv.Config)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := metricsauth.ServerOptions(addr, secure, "")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(opts, testEnv.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "metrics server listening", func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
	return addr
}

// saToken creates service account name and returns a token for it.
func saToken(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace}}
	if err := k8s.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(k8s.Delete(ctx, sa)) })
	cs, err := kubernetes.NewForConfig(testEnv.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(testNamespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a token for %s: %v", name, err)
	}
	return tr.Status.Token
}

// scrape GETs url with an optional bearer token; the server's certificate
// is self-signed, so it is not verified.
func scrape(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test server
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
