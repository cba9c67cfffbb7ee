// Package metricsauth holds how the project serves its metrics endpoints,
// the manager's and every agent's alike, so that the two cannot drift apart.
package metricsauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The serving certificate's file names in --metrics-cert-dir: those of a
// Secret of type kubernetes.io/tls mounted as a volume (cert-manager's
// Certificate writes such a Secret).
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// CertDirUsage is the help text of --metrics-cert-dir, the manager's and
// the agent's alike.
const CertDirUsage = "directory holding the metrics server's certificate (" + CertFile + ", a chain whose first certificate " +
	"is the server's) and key (" + KeyFile + "), reloaded when they change, so that scrapers can verify it; " +
	"empty serves a self-signed certificate made at start (scrapers must then skip verification). Needs --metrics-secure"

// ServerOptions serve a controller-runtime metrics endpoint at addr ("0"
// disables it). Secure is HTTPS where every request's bearer token must
// pass a TokenReview and a SubjectAccessReview for get on the non-resource
// URL /metrics, both made with the server's own identity, whose role must
// allow creating them (config/rbac for the manager, config/agent/role.yaml
// for the agent); otherwise plain HTTP to anyone who reaches addr, for
// local use. HTTPS offers HTTP/1.1 only (HTTP/2's stream handling has had
// denial-of-service flaws, CVE-2023-44487 and CVE-2023-39325, and a
// scraper gains nothing from it), as kubebuilder's scaffold does.
//
// certDir, when not empty, holds the serving certificate and key
// (CertFile, KeyFile), which controller-runtime's certificate watcher
// reloads when they are rotated; when empty the server makes a
// self-signed certificate in memory. The pair is loaded here once, so a
// missing, unreadable or mismatched file is an error naming the flag
// rather than controller-runtime's silent fallback to a self-signed
// certificate that every verifying scraper would then refuse.
func ServerOptions(addr string, secure bool, certDir string) (metricsserver.Options, error) {
	if !secure {
		if certDir != "" {
			return metricsserver.Options{}, errors.New("--metrics-cert-dir: set, but --metrics-secure=false serves plain HTTP")
		}
		return metricsserver.Options{BindAddress: addr}, nil
	}
	o := metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		TLSOpts:        []func(*tls.Config){disableHTTP2},
	}
	if certDir == "" {
		return o, nil
	}
	if err := checkPair(certDir); err != nil {
		return metricsserver.Options{}, fmt.Errorf("--metrics-cert-dir %q: %w", certDir, err)
	}
	o.CertDir, o.CertName, o.KeyName = certDir, CertFile, KeyFile
	return o, nil
}

// checkPair loads the certificate and key in dir and checks the
// certificate parses; it does not judge who signed it (the scraper does).
func checkPair(dir string) error {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		return err
	}
	if _, err := x509.ParseCertificate(pair.Certificate[0]); err != nil {
		return fmt.Errorf("%s: %w", CertFile, err)
	}
	return nil
}

func disableHTTP2(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
