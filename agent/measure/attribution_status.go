package measure

import (
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// What of the attribution status carries, and how coarsely: a window that
// only jitters must compare equal to the last one (ChangedMaterially), so
// the attribution adds no steady status write.
const (
	// maxPodWaits is status.latency.pods' bound (the CRD's MaxItems).
	maxPodWaits = 16
	// shareStep rounds offenders' shares (percent).
	shareStep = 5
	// shareMoved is how far a share must move to be worth a write.
	shareMoved = 10
)

// perSecond is d over the window, to two significant digits.
func perSecond(d, window time.Duration) *metav1.Duration {
	if window <= 0 || d <= 0 {
		return nil
	}
	v := float64(d) / window.Seconds()
	if v >= 1 {
		p := math.Pow(10, math.Floor(math.Log10(v))-1)
		v = math.Round(v/p) * p
	}
	return &metav1.Duration{Duration: time.Duration(v)}
}

// sharePercent is part of whole in percent, rounded to shareStep.
func sharePercent(part, whole time.Duration) int32 {
	if whole <= 0 {
		return 0
	}
	p := float64(part) / float64(whole) * 100
	return int32(math.Round(p/shareStep) * shareStep)
}

// podWaits is status.latency.pods: the pods that waited longest first, each
// with its top offenders (classes as the API names them).
func podWaits(att []PodAttribution, window time.Duration) []v1alpha1.PodWait {
	var out []v1alpha1.PodWait
	for _, a := range att {
		if len(out) == maxPodWaits {
			break
		}
		if a.Wait <= 0 {
			continue
		}
		pw := v1alpha1.PodWait{Namespace: a.Namespace, Name: a.Name, WaitPerSecond: perSecond(a.Wait, window)}
		for _, o := range a.Offenders {
			if len(pw.Offenders) == 5 {
				break
			}
			pw.Offenders = append(pw.Offenders, v1alpha1.Offender{Class: o.Class,
				Name: truncateName(o.Name), SharePercent: sharePercent(o.Wait, a.Wait)})
		}
		out = append(out, pw)
	}
	return out
}

// truncateName keeps a name within the CRD's 253 characters.
func truncateName(s string) string {
	const most = 253
	if len(s) <= most {
		return s
	}
	return s[:most-3] + "..."
}

// neighbourWaits sums the measured pods' wait charged to neighbours over the
// window, for the rollout's evidence; nil without attribution.
func neighbourWaits(att []PodAttribution, window time.Duration) *v1alpha1.NeighbourWait {
	if len(att) == 0 {
		return nil
	}
	var total, theirs time.Duration
	byName := map[string]time.Duration{}
	for _, a := range att {
		total += a.Wait
		for c, d := range a.ByClass {
			if c.IsNeighbour() {
				theirs += d
			}
		}
		for _, o := range a.Offenders {
			if o.Class.IsNeighbour() {
				byName[offenderLabel(o)] += o.Wait
			}
		}
	}
	n := &v1alpha1.NeighbourWait{PerSecond: perSecond(theirs, window), SharePercent: sharePercent(theirs, total)}
	var top time.Duration
	for name, d := range byName {
		if d > top || d == top && name < n.Top {
			top, n.Top = d, name
		}
	}
	return n
}

// offenderLabel is "Pod batch/nightly-tar", "KernelThread ksoftirqd/1".
func offenderLabel(o Offender) string {
	if o.Name == "" {
		return string(o.Class)
	}
	return string(o.Class) + " " + o.Name
}

// podWaitsMoved reports whether status.latency.pods changed enough to be
// worth a write: another pod or offender ranking, a share moved by
// shareMoved or more, a wait per second moved by more than a quarter.
func podWaitsMoved(a, b []v1alpha1.PodWait) bool {
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Namespace != y.Namespace || x.Name != y.Name || len(x.Offenders) != len(y.Offenders) {
			return true
		}
		if moved(x.WaitPerSecond, y.WaitPerSecond) {
			return true
		}
		for j := range x.Offenders {
			o, p := x.Offenders[j], y.Offenders[j]
			if o.Class != p.Class || o.Name != p.Name || abs32(o.SharePercent-p.SharePercent) >= shareMoved {
				return true
			}
		}
	}
	return false
}

func moved(a, b *metav1.Duration) bool {
	if a == nil || b == nil {
		return (a == nil) != (b == nil)
	}
	x, y := float64(a.Duration), float64(b.Duration)
	return math.Abs(x-y) > 0.25*math.Max(x, y)
}

func abs32(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}
