//go:build privileged

package vmtest

import (
	"testing"

	"latencytier.io/latencytier/agent/internal/attrtest"
)

// Noisy-neighbour attribution on the row's kernel and cgroup version, with
// systemd as init: the scenarios agent/measure runs on the development
// machine (agent/internal/attrtest documents each), here on cgroup v2
// (pods in the unified hierarchy, systemd driver) as well as v1, plus a hog
// in a real systemd service, which that machine (no systemd) cannot show.

func TestAttributionHogInAnotherPod(t *testing.T) {
	vm(t)
	attrtest.HogInAnotherPod(t)
}

func TestAttributionHogInSamePod(t *testing.T) {
	vm(t)
	attrtest.HogInSamePod(t)
}

func TestAttributionHogInSystemService(t *testing.T) {
	vm(t)
	attrtest.HogInSystemService(t)
}

func TestAttributionNoHog(t *testing.T) {
	vm(t)
	attrtest.NoHogInvented(t)
}

func TestAttributionSelfThrottling(t *testing.T) {
	vm(t)
	attrtest.SelfThrottling(t)
}
