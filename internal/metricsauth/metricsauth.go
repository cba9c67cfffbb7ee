// Package metricsauth holds how the project serves its metrics endpoints,
// the manager's and every agent's alike, so that the two cannot drift apart.
package metricsauth

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ServerOptions serve a controller-runtime metrics endpoint at addr ("0"
// disables it). Secure is HTTPS (a self-signed certificate kept in memory)
// where every request's bearer token must pass a TokenReview and a
// SubjectAccessReview for get on the non-resource URL /metrics, both made
// with the server's own identity, whose role must allow creating them
// (config/rbac for the manager, config/agent/role.yaml for the agent);
// otherwise plain HTTP to anyone who reaches addr, for local use. HTTPS
// offers HTTP/1.1 only (HTTP/2's stream handling has had denial-of-service
// flaws, CVE-2023-44487 and CVE-2023-39325, and a scraper gains nothing
// from it), as kubebuilder's scaffold does.
func ServerOptions(addr string, secure bool) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		TLSOpts:        []func(*tls.Config){disableHTTP2},
	}
}

func disableHTTP2(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
