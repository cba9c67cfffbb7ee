// Package buildinfo is latencytier_build_info, the one series both binaries'
// metrics endpoints serve to say what runs: the version make stamps into the
// binary (-X main.version), the Go release it was built with, and the role
// (manager or agent). docs/metrics.md lists it.
package buildinfo

import (
	"errors"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricName is the series' name.
const MetricName = "latencytier_build_info"

// Collector is latencytier_build_info{version, goversion, role} 1.
func Collector(role, version string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        MetricName,
		Help:        "Always 1: the version of the latencytier binary serving these metrics, the Go release it was built with, and its role (manager or agent).",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version(), "role": role},
	})
	g.Set(1)
	return g
}

// Register registers the series of role and version with reg; registering
// the same twice is not an error.
func Register(reg prometheus.Registerer, role, version string) error {
	err := reg.Register(Collector(role, version))
	if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
		return nil
	}
	return err
}
