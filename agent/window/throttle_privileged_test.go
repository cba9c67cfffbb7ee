//go:build privileged

package window

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/internal/ratio"

	"latencytier.io/latencytier/agent/findings"

	"github.com/go-logr/logr/testr"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
)

// v1Pod builds a cgroupfs-driver burstable pod with one container in the
// real cgroup v1 cpu controller under a unique kubepods name and removes it
// in t.Cleanup.
func v1Pod(t *testing.T) cgtest.Pod {
	t.Helper()
	return cgtest.V1Pod(t, "cpu", podcgroup.DriverCgroupfs, "ltmeasure-", nil)
}

func setQuota(t *testing.T, dir, quota string) {
	t.Helper()
	cgtest.Set(t, filepath.Join(dir, "cpu.cfs_quota_us"), quota)
}

// TestThrottlingRealCgroupV1 puts a busy process under a real 10% CFS quota:
// the pod is reported throttled (ratio > 0, an opted-in finding, outside a
// 0.01 budget); once the quota is removed the next window shows ratio 0.
// It writes only its own uniquely named cgroups, so it takes no kernellock
// (like cpuquota's real-cgroup tests): nothing another test or benchmark
// changes makes a CFS quota stop throttling or an absent one throttle, and
// a loaded machine only delays the first throttled period, which the
// throttled window waits for.
func TestThrottlingRealCgroupV1(t *testing.T) {
	pod := v1Pod(t)
	kubepods, uid, podDir := pod.Kubepods, pod.UID, pod.Dir
	setQuota(t, podDir, "10000") // 10 ms per 100 ms period
	cgtest.Spin(t, pod.CtrDir)

	m := New(measure.New(host.New("/"), testr.New(t), measure.WithAttach(measure.AttachNone), measure.WithPodcgroup(podcgroup.WithKubepods(kubepods))))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	budget := "0.01"
	in := Input{
		Tuning: v1alpha1.TuningSpec{LatencyBudget: &v1alpha1.LatencyBudget{ThrottledRatio: &budget}},
		Pods:   []podcgroup.Pod{{UID: uid, Namespace: "shop", Name: "api", OptedIn: true}},
	}
	collect := func() *measure.Result {
		t.Helper()
		res, err := m.Collect(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := collect(); len(res.Throttling) != 0 {
		t.Fatalf("first sight of a pod should only set its baseline, got %+v", res.Throttling)
	}
	// The window ends once the kernel has throttled twice: throttled time
	// is added when a throttled period ends (unthrottle), nr_throttled when
	// it begins, so one throttle alone may show 1 period and 0 s.
	for range 2 {
		if cgtest.ThrottledGrowth(t, podDir, 0) == 0 {
			t.Fatal("the kernel never throttled a busy process under a 10% quota")
		}
	}
	res := collect()
	if len(res.Throttling) != 1 {
		t.Fatalf("throttling %+v, want the one pod", res.Throttling)
	}
	pt := res.Throttling[0]
	t.Logf("with quota: %d of %d periods throttled, ratio %s, %s throttled", pt.Throttled, pt.Periods, pt.Ratio, pt.ThrottledTime.Duration)
	if pt.Throttled <= 0 || pt.Periods <= 0 || pt.Ratio == ratio.Format(0) || pt.ThrottledTime.Duration <= 0 {
		t.Fatalf("a spinning pod under a 10%% quota is not throttled: %+v", pt)
	}
	if res.ThrottledRatio != pt.Ratio || pt.Namespace != "shop" || pt.Name != "api" || !pt.OptedIn {
		t.Errorf("result %q / %+v", res.ThrottledRatio, pt)
	}
	mustFind(t, res.Findings, findings.FindingOptedInThrottled, "shop/api", "quota")
	if res.Budget.Status != "False" || res.Budget.Reason != v1alpha1.ReasonOutsideBudget {
		t.Errorf("budget %s (%s): %s", res.Budget.Status, res.Budget.Reason, res.Budget.Message)
	}

	setQuota(t, podDir, "-1")
	collect() // the window with the quota removed starts here
	time.Sleep(700 * time.Millisecond)
	res = collect()
	if len(res.Throttling) != 1 {
		t.Fatalf("an opted-in pod without a quota should still be listed: %+v", res.Throttling)
	}
	pt = res.Throttling[0]
	t.Logf("quota removed: %d of %d periods throttled, ratio %s", pt.Throttled, pt.Periods, pt.Ratio)
	if pt.Throttled != 0 || pt.Ratio != ratio.Format(0) {
		t.Fatalf("still throttled after quota removal: %+v", pt)
	}
	mustNotFind(t, res.Findings, findings.FindingOptedInThrottled)
	if res.Budget.Status != "True" {
		t.Errorf("budget %s (%s): %s", res.Budget.Status, res.Budget.Reason, res.Budget.Message)
	}
}

// TestThrottlingSkipsUnlimitedPods: a pod neither limited nor opted in is
// not listed.
func TestThrottlingSkipsUnlimitedPods(t *testing.T) {
	pod := v1Pod(t)
	kubepods, uid := pod.Kubepods, pod.UID
	m := New(measure.New(host.New("/"), testr.New(t), measure.WithAttach(measure.AttachNone), measure.WithPodcgroup(podcgroup.WithKubepods(kubepods))))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	in := Input{Pods: []podcgroup.Pod{{UID: uid, Namespace: "shop", Name: "free"}}}
	for i := 0; i < 2; i++ {
		res, err := m.Collect(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Throttling) != 0 || res.ThrottledRatio != "" {
			t.Fatalf("unlimited pod listed: %+v", res.Throttling)
		}
	}
}
