package controllers

import (
	"crypto/tls"
	"testing"
)

// TestSecureMetricsRefuseHTTP2: the metrics endpoint (the manager's and,
// through the same metricsauth options, every agent's) negotiates only
// HTTP/1.1, whatever the client offers: HTTP/2 stream handling has had
// denial-of-service flaws (CVE-2023-44487, CVE-2023-39325) and a scraper
// gains nothing from it. This is the kubebuilder scaffold's default.
func TestSecureMetricsRefuseHTTP2(t *testing.T) {
	needSuite(t)
	addr := serveMetrics(t, true)
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // a self-signed test endpoint
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("negotiated %q, want http/1.1", p)
	}
}
