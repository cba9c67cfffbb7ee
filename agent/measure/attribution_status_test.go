package measure

import (
	"testing"
	"time"

	"latencytier.io/latencytier/api/v1alpha1"
)

func victim(wait time.Duration, offenders ...Offender) PodAttribution {
	by := map[OffenderClass]time.Duration{}
	for _, o := range offenders {
		by[o.Class] += o.Wait
	}
	return PodAttribution{Namespace: "shop", Name: "gateway-0", Wait: wait, ByClass: by, Offenders: offenders}
}

// A hog pod holding 71 % of a measured pod's 38 ms of wait a second is in
// status with rounded figures and in the rollout's evidence as the top
// neighbour (agent/findings judges it: NoisyNeighbor).
func TestAttributionInStatus(t *testing.T) {
	const window = 2 * time.Second
	att := []PodAttribution{victim(76*time.Millisecond,
		Offender{Class: OffenderPod, Name: "batch/nightly-tar", Wait: 54 * time.Millisecond},
		Offender{Class: OffenderKernelThread, Name: "ksoftirqd/1", Wait: 15 * time.Millisecond},
		Offender{Class: OffenderIdle, Wait: 7 * time.Millisecond})}
	pw := podWaits(att, window)
	if len(pw) != 1 || pw[0].WaitPerSecond.Duration != 38*time.Millisecond {
		t.Fatalf("podWaits = %+v, want one pod waiting 38ms/s", pw)
	}
	want := []v1alpha1.Offender{{Class: v1alpha1.OffenderPod, Name: "batch/nightly-tar", SharePercent: 70},
		{Class: v1alpha1.OffenderKernelThread, Name: "ksoftirqd/1", SharePercent: 20}, {Class: v1alpha1.OffenderIdle, SharePercent: 10}}
	for i, o := range pw[0].Offenders {
		if o != want[i] {
			t.Errorf("offender %d = %+v, want %+v", i, o, want[i])
		}
	}
	n := neighbourWaits(att, window)
	if n.Top != "Pod batch/nightly-tar" || n.SharePercent != 90 || n.PerSecond.Duration != 35*time.Millisecond {
		t.Errorf("neighbours = %+v (%v/s), want Pod batch/nightly-tar, 90%%, 35ms/s", n, n.PerSecond)
	}
}

// A window that only jitters is not a status write; a new top offender or
// a share that moves by 10 points is.
func TestPodWaitsMovedMaterially(t *testing.T) {
	const window = time.Second
	base := podWaits([]PodAttribution{victim(40*time.Millisecond,
		Offender{Class: OffenderPod, Name: "a/hog", Wait: 30 * time.Millisecond},
		Offender{Class: OffenderIdle, Wait: 10 * time.Millisecond})}, window)
	jitter := podWaits([]PodAttribution{victim(42*time.Millisecond,
		Offender{Class: OffenderPod, Name: "a/hog", Wait: 31 * time.Millisecond},
		Offender{Class: OffenderIdle, Wait: 11 * time.Millisecond})}, window)
	swapped := podWaits([]PodAttribution{victim(40*time.Millisecond,
		Offender{Class: OffenderIdle, Wait: 30 * time.Millisecond},
		Offender{Class: OffenderPod, Name: "a/hog", Wait: 10 * time.Millisecond})}, window)
	shifted := podWaits([]PodAttribution{victim(40*time.Millisecond,
		Offender{Class: OffenderPod, Name: "a/hog", Wait: 25 * time.Millisecond},
		Offender{Class: OffenderIdle, Wait: 15 * time.Millisecond})}, window)
	if podWaitsMoved(base, jitter) {
		t.Error("jitter counted as a change")
	}
	if !podWaitsMoved(base, swapped) || !podWaitsMoved(base, shifted) || !podWaitsMoved(base, nil) {
		t.Error("a new ranking, a 10-point share move or the list going must count")
	}
}
