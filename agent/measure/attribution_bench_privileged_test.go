//go:build privileged

package measure

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/measure/bpf"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/internal/kernellock"
)

// BenchmarkAttributionCost measures the tracer's in-kernel cost per
// scheduler event (BPF run time / runs of its three programs, BPF stats on)
// with attribution against the same program loaded WithoutAttribution, as
// pairs of windows whose order alternates, and libbpf-tools runqlat's cost
// in the same windows (it runs throughout). Two loads:
//   - measured: stress-ng --switch inside a measured pod, so every event is
//     a measured task's (the worst case for attribution);
//   - victim: stress-ng --switch outside any measured pod and the
//     attribution tests' victim (waking every millisecond) inside one.
//
// Reported per load: the median with/without ratio with its min and max,
// and the medians of each side's and runqlat's ns per event. No assertion:
// figures, not a pass/fail.
func BenchmarkAttributionCost(b *testing.B) {
	needRoot(b)
	kernellock.Lock(b)
	pairs := 5
	if v, err := strconv.Atoi(os.Getenv("ATTR_BENCH_PAIRS")); err == nil && v >= 3 {
		pairs = v
	}
	const warm, window = 500 * time.Millisecond, 3 * time.Second
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Fatalf("enabling BPF run-time stats: %v", err)
	}
	defer stats.Close()

	loads := []string{"measured", "victim"}
	total := time.Duration(len(loads)*pairs*2) * (warm + window + 200*time.Millisecond)
	before := loadedIDs()
	_, _ = startRunqlat(b, int(total.Seconds())+30)
	theirProgs, err := programsNamed("sched_", before)
	if err != nil || len(theirProgs) == 0 {
		b.Fatalf("finding runqlat's programs: %v (found %d)", err, len(theirProgs))
	}
	b.ResetTimer()
	for _, load := range loads {
		b.Run(load, func(b *testing.B) {
			pod := cgtest.V1Pod(b, "cpu", podcgroup.DriverCgroupfs, "ltattrbench-", nil)
			var ids []bpf.PodCgroup
			for _, dir := range []string{pod.Dir, pod.CtrDir} {
				ino, err := host.New("/").Inode(dir)
				if err != nil {
					b.Fatal(err)
				}
				ids = append(ids, bpf.PodCgroup{ID: ino})
			}
			// stress-ng forks its workers at start: the sleep lets StartIn
			// move the shell into the cgroup first.
			stress := fmt.Sprintf("sleep 0.2; exec stress-ng --switch 1 --timeout %ds", int(total.Seconds())+10)
			if load == "measured" {
				cgtest.StartIn(b, pod.CtrDir, "sh", "-c", stress)
			} else {
				pod.StartVictim(b, pod.CtrDir, -1, 0)
				startLoad(b, loadSwitch, total)
			}
			time.Sleep(500 * time.Millisecond)
			var ratios, with, without, theirs []float64
			for p := range pairs {
				order := []bool{false, true}
				if p%2 == 1 {
					order = []bool{true, false}
				}
				var ns [2]float64
				for _, attr := range order {
					ours, rq := attributionWindow(b, attr, ids, theirProgs, warm, window)
					i := 0
					if attr {
						i = 1
					}
					ns[i] = ours
					theirs = append(theirs, rq)
				}
				without, with = append(without, ns[0]), append(with, ns[1])
				ratios = append(ratios, ns[1]/ns[0])
				b.Logf("%s pair %d: without %.1f ns/event, with %.1f ns/event, ratio %.3f (runqlat %.1f ns/event)",
					load, p+1, ns[0], ns[1], ns[1]/ns[0], theirs[len(theirs)-1])
			}
			med, lo, hi := medianMinMax(ratios)
			b.ReportMetric(med, "ratio-median")
			b.ReportMetric(lo, "ratio-min")
			b.ReportMetric(hi, "ratio-max")
			mw, _, _ := medianMinMax(with)
			mo, _, _ := medianMinMax(without)
			mr, _, _ := medianMinMax(theirs)
			b.ReportMetric(mw, "with-ns/event")
			b.ReportMetric(mo, "without-ns/event")
			b.ReportMetric(mr, "runqlat-ns/event")
			b.Logf("%s: with/without %.3f (min %.3f, max %.3f, %d pairs); with %.1f, without %.1f, runqlat %.1f ns/event (medians)",
				load, med, lo, hi, pairs, mw, mo, mr)
		})
	}
}

// attributionWindow loads the tracer with or without attribution, measures
// the given cgroups, and returns its and runqlat's ns per event over one
// window after a warm-up.
func attributionWindow(b *testing.B, attr bool, ids []bpf.PodCgroup, theirProgs []*ebpf.Program, warm, window time.Duration) (ours, theirs float64) {
	b.Helper()
	var opts []bpf.Option
	if !attr {
		opts = append(opts, bpf.WithoutAttribution())
	}
	tr, err := bpf.Open(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	if err := tr.SetPodCgroups(ids); err != nil {
		b.Fatal(err)
	}
	time.Sleep(warm)
	o0, _ := costOf(tr.Programs())
	t0, _ := costOf(theirProgs)
	time.Sleep(window)
	o1, _ := costOf(tr.Programs())
	t1, _ := costOf(theirProgs)
	if attr {
		if _, err := tr.ReadAttribution(); err != nil {
			b.Fatal(err)
		}
	}
	o, t := o1.sub(o0), t1.sub(t0)
	if o.runs == 0 || t.runs == 0 {
		b.Fatalf("no BPF runs recorded (ours %+v, runqlat %+v)", o, t)
	}
	return float64(o.runtime.Nanoseconds()) / float64(o.runs), float64(t.runtime.Nanoseconds()) / float64(t.runs)
}

func medianMinMax(xs []float64) (med, lo, hi float64) {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0, 0, 0
	}
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}
