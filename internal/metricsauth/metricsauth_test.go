package metricsauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// serverName is the name the chart's certificate carries and the
// PodMonitor's tlsConfig.serverName asks for (the agents run on the host
// network, so no address of theirs is in the certificate).
const serverName = "latencytier-metrics.tier.svc"

// ca is a certificate authority made for one test.
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (c *ca) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.cert)
	return p
}

// issue writes a serving certificate for dnsName signed by c, and its key,
// into a new directory laid out as a mounted kubernetes.io/tls Secret.
func (c *ca) issue(t *testing.T, dnsName string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: dnsName},
		DNSNames:     []string{dnsName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, CertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	write(t, filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return dir
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// serve starts controller-runtime's metrics server with o on 127.0.0.1
// until the test ends, and returns its address once it accepts
// connections. The authentication filter is built against an API server
// that is never contacted: the handshake is what the tests judge.
func serve(t *testing.T, o metricsserver.Options) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	o.BindAddress = addr
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
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
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return addr
		}
		select {
		case err := <-done:
			t.Fatalf("metrics server at %s stopped: %v", addr, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// handshake connects to addr as a scraper verifying with roots and
// serverName, and returns the negotiated protocol.
func handshake(addr string, roots *x509.CertPool) (string, error) {
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: serverName, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	return c.ConnectionState().NegotiatedProtocol, nil
}

// TestServesProvidedCertificate: with --metrics-cert-dir the metrics
// server presents that certificate, so a scraper holding the issuing CA
// verifies it (the PodMonitor's tlsConfig.ca and serverName), one holding
// another CA is refused, and HTTP/2 stays off; without it, the
// self-signed certificate of old verifies with neither.
func TestServesProvidedCertificate(t *testing.T) {
	issuer, other := newCA(t, "latencytier test CA"), newCA(t, "another CA")
	o, err := ServerOptions("", true, issuer.issue(t, serverName))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, o)

	proto, err := handshake(addr, issuer.pool())
	if err != nil {
		t.Fatalf("verifying with the issuing CA: %v", err)
	}
	if proto != "http/1.1" {
		t.Errorf("negotiated %q, want http/1.1 (HTTP/2 off)", proto)
	}
	var unknown x509.UnknownAuthorityError
	if _, err := handshake(addr, other.pool()); !errors.As(err, &unknown) {
		t.Errorf("verifying with another CA: %v, want an unknown-authority refusal", err)
	}

	// The request itself still needs a token the API server accepts; the
	// verified connection reaches the authenticating filter, not a 200.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: issuer.pool(), ServerName: serverName}}}
	resp, err := hc.Get("https://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("GET /metrics without a token over a verified connection: %s, want a refusal", resp.Status)
	}

	o, err = ServerOptions("", true, "")
	if err != nil {
		t.Fatal(err)
	}
	selfSigned := serve(t, o)
	if _, err := handshake(selfSigned, issuer.pool()); err == nil {
		t.Error("the self-signed certificate verified with the test CA")
	}
}

// TestCertDirRefusesBadInput: a --metrics-cert-dir that lacks the pair,
// holds a key of another certificate, or comes with plain HTTP is an error
// naming the flag, not controller-runtime's silent self-signed fallback.
func TestCertDirRefusesBadInput(t *testing.T) {
	issuer := newCA(t, "latencytier test CA")
	mismatched := issuer.issue(t, serverName)
	other := issuer.issue(t, serverName)
	b, err := os.ReadFile(filepath.Join(other, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(mismatched, KeyFile), b)
	garbage := t.TempDir()
	write(t, filepath.Join(garbage, CertFile), []byte("not a certificate"))
	write(t, filepath.Join(garbage, KeyFile), []byte("not a key"))

	for what, c := range map[string]struct {
		dir    string
		secure bool
		says   string
	}{
		"an empty directory":        {t.TempDir(), true, "no such file"},
		"a key of another cert":     {mismatched, true, "does not match"},
		"files that are not PEM":    {garbage, true, "failed to find any PEM data"},
		"a cert dir for plain HTTP": {issuer.issue(t, serverName), false, "--metrics-secure=false"},
	} {
		_, err := ServerOptions(":0", c.secure, c.dir)
		if err == nil || !strings.Contains(err.Error(), "--metrics-cert-dir") || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one naming --metrics-cert-dir and saying %q", what, err, c.says)
		}
	}
}
