package measure

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/cgstat"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/ratio"
)

// maxThrottling bounds status.throttling.
const maxThrottling = 32

// cpuStat is one cgroup's cumulative cpu.stat throttling counters.
type cpuStat struct {
	periods, throttled int64
	time               time.Duration
}

func (c cpuStat) sub(o cpuStat) cpuStat {
	return cpuStat{periods: c.periods - o.periods, throttled: c.throttled - o.throttled, time: c.time - o.time}
}

func (c cpuStat) ratio() float64 {
	if c.periods <= 0 || c.throttled <= 0 {
		return 0
	}
	return float64(c.throttled) / float64(c.periods)
}

// formatRatio renders a ratio the way status carries it ("0.0123").
func formatRatio(r float64) string { return ratio.Format(r) }

// podThrottle is one pod's throttling over the window, with the cgroup
// level (pod or a container) that throttled most.
type podThrottle struct {
	pod   podcgroup.Pod
	delta cpuStat
	// pressure is the pod cgroup's cpu.pressure "some avg10" (cgroup v2
	// only; "" otherwise).
	pressure string
}

// throttler keeps each pod cgroup's previous cpu.stat.
type throttler struct {
	root *host.Root
	opts []podcgroup.Option
	prev map[string]cpuStat // by cgroup dir
}

// collect returns, for each pod with a CFS limit or measured (see pods.go),
// its throttling since the previous collect. A pod seen for the first time
// only sets its baseline.
func (t *throttler) collect(pods []podcgroup.Pod, measured func(podcgroup.Pod) bool) ([]podThrottle, error) {
	cur := map[string]cpuStat{}
	var out []podThrottle
	var errs []error
	for _, p := range pods {
		dirs, err := podcgroup.Find(t.root, p.UID, t.opts...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !measured(p) && !t.hasLimit(dirs) {
			continue
		}
		pt, seen := t.podDelta(p, dirs, cur)
		if dirs.Version == 2 {
			pt.pressure, _ = cgroupPressure(t.root, filepath.Join(dirs.Pod, "cpu.pressure"))
		}
		if seen {
			out = append(out, pt)
		}
	}
	t.prev = cur
	sortThrottles(out)
	if len(errs) > 0 && len(out) == 0 && len(errs) == len(pods) {
		return out, fmt.Errorf("no pod cgroup found: %w", errs[0])
	}
	return out, nil
}

// podDelta reads cpu.stat of the pod and its containers and keeps the level
// with the highest throttled ratio (the pod's own on a tie).
func (t *throttler) podDelta(p podcgroup.Pod, dirs *podcgroup.Dirs, cur map[string]cpuStat) (podThrottle, bool) {
	best := podThrottle{pod: p}
	seen := false
	for _, dir := range append([]string{dirs.Pod}, dirs.Containers...) {
		ct, err := cgstat.Read(t.root, dir)
		if err != nil {
			continue
		}
		st := cpuStat{periods: ct.Periods, throttled: ct.Throttled, time: ct.Time}
		cur[dir] = st
		old, ok := t.prev[dir]
		if !ok {
			continue
		}
		d := st.sub(old)
		if !seen || d.ratio() > best.delta.ratio() {
			best.delta = d
		}
		seen = true
	}
	return best, seen
}

func sortThrottles(ps []podThrottle) {
	slices.SortStableFunc(ps, func(a, b podThrottle) int {
		if c := cmp.Compare(b.delta.ratio(), a.delta.ratio()); c != 0 {
			return c
		}
		if c := cmp.Compare(b.delta.time, a.delta.time); c != 0 {
			return c
		}
		return cmp.Compare(a.pod.Namespace+"/"+a.pod.Name, b.pod.Namespace+"/"+b.pod.Name)
	})
}

// hasLimit reports whether the pod or one of its containers has a CFS quota.
func (t *throttler) hasLimit(d *podcgroup.Dirs) bool {
	for _, dir := range append([]string{d.Pod}, d.Containers...) {
		if cgstat.HasLimit(t.root, d.Version, dir) {
			return true
		}
	}
	return false
}

// highestMeasured is the highest throttled ratio of a measured pod in ps;
// ok is false when ps has none.
func highestMeasured(ps []podThrottle, t v1alpha1.TuningSpec) (highest float64, ok bool) {
	for _, p := range ps {
		if measured(t, p.pod) {
			highest, ok = max(highest, p.delta.ratio()), true
		}
	}
	return highest, ok
}

// podThrottlings renders every pod (most throttled first; status keeps the
// first maxThrottling) and the highest ratio of all.
func podThrottlings(ps []podThrottle) (list []v1alpha1.PodThrottling, highest float64) {
	for _, p := range ps {
		r := p.delta.ratio()
		highest = max(highest, r)
		list = append(list, v1alpha1.PodThrottling{
			Namespace:     p.pod.Namespace,
			Name:          p.pod.Name,
			OptedIn:       p.pod.OptedIn,
			Periods:       p.delta.periods,
			Throttled:     p.delta.throttled,
			Ratio:         formatRatio(r),
			ThrottledTime: &metav1.Duration{Duration: p.delta.time},
		})
	}
	return list, highest
}
