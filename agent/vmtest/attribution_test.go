//go:build privileged

package vmtest

import (
	"testing"

	"latencytier.io/latencytier/agent/internal/attrtest"
)

// TestAttribution: noisy-neighbour attribution on the row's kernel and
// cgroup version, with systemd as init. The scenarios agent/measure runs
// on the development machine (agent/internal/attrtest documents each),
// here on cgroup v2 (pods in the unified hierarchy, systemd driver) as
// well as v1, plus a hog in a real systemd service, which that machine (no
// systemd) cannot show. One tracer for all: loading it takes seconds on
// emulated CPUs.
func TestAttribution(t *testing.T) {
	vm(t)
	e := attrtest.Open(t)
	for _, s := range attrtest.Scenarios {
		t.Run(s.Name, func(t *testing.T) { s.Run(t, e) })
	}
}
