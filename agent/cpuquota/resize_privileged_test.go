//go:build privileged

package cpuquota

import (
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cgstat"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/internal/testroot"
)

// TestRealResizeThenOptOutRestoresKubeletsQuota: a pod opts in with a
// 4-CPU limit (quota 400000 per 100000 period) and the agent removes it;
// kubelet resizes it in place to 1 CPU (writes 100000 at pod and
// container); the agent re-asserts; the pod opts out. Revert must write
// kubelet's 1-CPU quota back, not the 4-CPU original journaled before the
// resize: with it the pod would run above its limit.
func TestRealResizeThenOptOutRestoresKubeletsQuota(t *testing.T) {
	kp, burstable := kubepods(t)
	root := testroot.RealKernel(t)
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	p := newRealPod(t, burstable, "resized", "400000", "400000")

	pass(t, e, kp, p.pod)
	if pq, cq := p.quotas(t); pq != cgstat.UnlimitedV1 || cq != cgstat.UnlimitedV1 {
		t.Fatalf("after apply: pod %s, container %s; want -1", pq, cq)
	}
	// kubelet's in-place resize to 1 CPU: the pod's limit, then the
	// container's within it.
	cgtest.Set(t, filepath.Join(p.dir, cgstat.QuotaFileV1), "100000")
	cgtest.Set(t, filepath.Join(p.ctr, cgstat.QuotaFileV1), "100000")
	pass(t, e, kp, p.pod)
	if pq, cq := p.quotas(t); pq != cgstat.UnlimitedV1 || cq != cgstat.UnlimitedV1 {
		t.Fatalf("after the resize and a pass: pod %s, container %s; want -1 re-asserted", pq, cq)
	}
	// The pod opts out: no knob names it any more.
	if _, err := e.Apply(apply.Meta{Profile: "p"}, nil); err != nil {
		t.Fatal(err)
	}
	if pq, cq := p.quotas(t); pq != "100000" || cq != "100000" {
		t.Fatalf("after opting out: pod %s, container %s; want kubelet's 1-CPU quota 100000 (not the stale 400000)", pq, cq)
	}
}
