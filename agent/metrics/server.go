package metrics

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ServerOptions serve the agent's metrics endpoint at addr ("0" disables
// it) the way the manager serves its own: secure is HTTPS (a self-signed
// certificate kept in memory) where every request's bearer token must pass
// a TokenReview and a SubjectAccessReview for get on /metrics (the agent's
// role may create both: config/agent/role.yaml); otherwise plain HTTP to
// anyone who reaches addr, for local use.
func ServerOptions(addr string, secure bool) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
	}
}
