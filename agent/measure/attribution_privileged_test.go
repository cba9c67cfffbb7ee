//go:build privileged

package measure_test

import (
	"testing"

	"latencytier.io/latencytier/agent/internal/attrtest"
	"latencytier.io/latencytier/internal/kernellock"
)

// The attribution scenarios on this machine's kernel (cgroup v1 here);
// agent/vmtest runs the same ones in the kernel VMs (cgroup v1 and v2,
// systemd as init). agent/internal/attrtest documents each.

func TestAttributionHogInAnotherPod(t *testing.T) {
	kernellock.Lock(t)
	attrtest.HogInAnotherPod(t, attrtest.Open(t))
}

func TestAttributionHogInSamePod(t *testing.T) {
	kernellock.Lock(t)
	attrtest.HogInSamePod(t, attrtest.Open(t))
}

func TestAttributionNoHog(t *testing.T) {
	kernellock.Lock(t)
	attrtest.NoHogInvented(t, attrtest.Open(t))
}

func TestAttributionSelfThrottling(t *testing.T) {
	kernellock.Lock(t)
	attrtest.SelfThrottling(t, attrtest.Open(t))
}

// RunQueueContention on real attribution (issue 45): raised beside a
// pinned hog after raiseAfterWindows windows, cleared clearAfterWindows
// windows after it stops (about 9 s here); never raised by the pod's own
// quota (about 7 s). Not in attrtest.Scenarios: the kernel VM rows have
// not run them.
func TestContentionRaisedAndCleared(t *testing.T) {
	kernellock.Lock(t)
	attrtest.ContentionRaisedAndCleared(t, attrtest.Open(t))
}

func TestContentionNotFromOwnQuota(t *testing.T) {
	kernellock.Lock(t)
	attrtest.ContentionNotFromOwnQuota(t, attrtest.Open(t))
}

// A measured pod's budget verdict on real attribution (issue 45 item 2):
// Outside beside a pinned hog, its wait mostly queueing behind others.
func TestPodBudgetOutsideBesideHog(t *testing.T) {
	kernellock.Lock(t)
	attrtest.PodBudgetOutsideBesideHog(t, attrtest.Open(t))
}

// Per-pod run-queue p99 (issue 45 item 2): a measured pod beside a pinned
// busy loop has a p99 of its own, above a quiet measured pod's.
func TestPodP99RisesBesideHog(t *testing.T) {
	kernellock.Lock(t)
	attrtest.PodP99RisesBesideHog(t, attrtest.Open(t))
}
