// Package throttling measures each pod's CFS throttling over a window: the
// growth of its pod and container cgroups' cpu.stat counters (agent/cgstat,
// the level that throttled most), and on cgroup v2 the pod's cpu.pressure.
// It is one of agent/measure's sources, and shapes its figures as
// LatencyNode status carries them.
package throttling

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/cgstat"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/ratio"
)

// MaxListed bounds status.throttling.
const MaxListed = 32

// Stat is one cgroup's cumulative cpu.stat throttling and burst counters.
type Stat struct {
	Periods, Throttled int64
	Time               time.Duration
	Bursts             int64
	BurstTime          time.Duration
}

func (c Stat) sub(o Stat) Stat {
	return Stat{Periods: c.Periods - o.Periods, Throttled: c.Throttled - o.Throttled, Time: c.Time - o.Time,
		Bursts: c.Bursts - o.Bursts, BurstTime: c.BurstTime - o.BurstTime}
}

// Ratio is the throttled share of periods (0 without periods).
func (c Stat) Ratio() float64 {
	if c.Periods <= 0 || c.Throttled <= 0 {
		return 0
	}
	return float64(c.Throttled) / float64(c.Periods)
}

// Pod is one pod's throttling over the window, with the cgroup
// level (pod or a container) that throttled most.
type Pod struct {
	Pod   podcgroup.Pod
	Delta Stat
	// Pressure is the pod cgroup's cpu.pressure "some avg10" (cgroup v2
	// only; "" otherwise).
	Pressure string
}

// Meter keeps each pod cgroup's previous cpu.stat.
type Meter struct {
	root *host.Root
	opts []podcgroup.Option
	prev map[string]Stat // by cgroup dir
}

// New returns a Meter reading root, finding pod cgroups with opts.
func New(root *host.Root, opts ...podcgroup.Option) *Meter {
	return &Meter{root: root, opts: opts}
}

// Collect returns, for each pod with a CFS limit or measured, its
// throttling since the previous Collect, most throttled first. A pod seen for the first time
// only sets its baseline.
func (t *Meter) Collect(pods []podcgroup.Pod, measured func(podcgroup.Pod) bool) ([]Pod, error) {
	cur := map[string]Stat{}
	var out []Pod
	var errs []error
	for _, p := range pods {
		dirs, err := podcgroup.Find(t.root, p.UID, t.opts...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !measured(p) && !t.HasLimit(dirs) {
			continue
		}
		pt, seen := t.podDelta(p, dirs, cur)
		if dirs.Version == 2 {
			pt.Pressure, _ = cgroupPressure(t.root, filepath.Join(dirs.Pod, "cpu.pressure"))
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
// with the highest throttled ratio (the pod's own on a tie), its burst
// counters with it.
func (t *Meter) podDelta(p podcgroup.Pod, dirs *podcgroup.Dirs, cur map[string]Stat) (Pod, bool) {
	best := Pod{Pod: p}
	seen := false
	for _, dir := range append([]string{dirs.Pod}, dirs.Containers...) {
		ct, err := cgstat.Read(t.root, dir)
		if err != nil {
			continue
		}
		st := Stat(ct)
		cur[dir] = st
		old, ok := t.prev[dir]
		if !ok {
			continue
		}
		d := st.sub(old)
		if !seen || d.Ratio() > best.Delta.Ratio() {
			best.Delta = d
		}
		seen = true
	}
	return best, seen
}

func sortThrottles(ps []Pod) {
	slices.SortStableFunc(ps, func(a, b Pod) int {
		if c := cmp.Compare(b.Delta.Ratio(), a.Delta.Ratio()); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Delta.Time, a.Delta.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Pod.Namespace+"/"+a.Pod.Name, b.Pod.Namespace+"/"+b.Pod.Name)
	})
}

// HasLimit reports whether the pod or one of its containers has a CFS quota.
func (t *Meter) HasLimit(d *podcgroup.Dirs) bool {
	for _, dir := range append([]string{d.Pod}, d.Containers...) {
		if cgstat.HasLimit(t.root, d.Version, dir) {
			return true
		}
	}
	return false
}

// Summary is a window's throttling as status carries it.
type Summary struct {
	// All is every pod, most throttled first (status lists the first
	// MaxListed).
	All []v1alpha1.PodThrottling
	// Ratio is the highest ratio of all ("" without pods).
	Ratio string
	// MeasuredRatio is the highest ratio of a measured pod ("" when none):
	// the rollout's evidence, which pods outside the tier must not sway.
	MeasuredRatio string
	// Pressure is, by namespace/name, each pod's cpu.pressure "some
	// avg10" (cgroup v2 only).
	Pressure map[string]string
}

// Summarise shapes ps (from Collect) for status; measured says which pods
// the tier measures.
func Summarise(ps []Pod, measured func(podcgroup.Pod) bool) Summary {
	var s Summary
	var highest, highestMeasured float64
	var anyMeasured bool
	for _, p := range ps {
		r := p.Delta.Ratio()
		highest = max(highest, r)
		if measured(p.Pod) {
			highestMeasured, anyMeasured = max(highestMeasured, r), true
		}
		s.All = append(s.All, v1alpha1.PodThrottling{
			Namespace:     p.Pod.Namespace,
			Name:          p.Pod.Name,
			OptedIn:       p.Pod.OptedIn && !p.Pod.Burst,
			Burst:         p.Pod.Burst,
			Periods:       p.Delta.Periods,
			Throttled:     p.Delta.Throttled,
			Ratio:         ratio.Format(r),
			ThrottledTime: &metav1.Duration{Duration: p.Delta.Time},
			Bursts:        p.Delta.Bursts,
			BurstTime:     burstTime(p.Delta.BurstTime),
		})
		if p.Pressure != "" {
			if s.Pressure == nil {
				s.Pressure = map[string]string{}
			}
			s.Pressure[p.Pod.Namespace+"/"+p.Pod.Name] = p.Pressure
		}
	}
	if len(ps) > 0 {
		s.Ratio = ratio.Format(highest)
	}
	if anyMeasured {
		s.MeasuredRatio = ratio.Format(highestMeasured)
	}
	return s
}

// burstTime is d for status, nil when the pod never burst (most pods, and
// every pod on a kernel without burst).
func burstTime(d time.Duration) *metav1.Duration {
	if d <= 0 {
		return nil
	}
	return &metav1.Duration{Duration: d}
}

// cgroupPressure reads "some avg10=" of a cgroup v2 cpu.pressure. The file
// has /proc/pressure/cpu's format, but procfs only reads the latter, so it
// is parsed here.
func cgroupPressure(root *host.Root, path string) (string, error) {
	b, err := root.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "some ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "avg10="); ok {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("no some avg10 in %s", path)
}
