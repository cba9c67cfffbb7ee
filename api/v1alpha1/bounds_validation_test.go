package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/figures"
	"latencytier.io/latencytier/internal/knobs"
)

// Issue 40's bad profiles: every value bounded, the RT runtime between a
// floor and a ceiling in whole microseconds, the CPUs sized, CPU 0 isolated
// only by choice, no empty node selector, reboots only through a canary,
// rollouts measured only in granted namespaces, verdicts from enough
// samples. Each is refused by the API server, naming the field.
func TestBoundedProfilesAreRefusedNamingTheField(t *testing.T) {
	type bad struct{ name, spec, field, why string }
	var cases []bad
	// Every allowlisted sysctl, just outside each end of its bounds and
	// with a value that is not of its type.
	for _, n := range knobs.Allowed() {
		b, _ := knobs.BoundsOf(n)
		var values []string
		switch b.Kind {
		case knobs.KindInteger:
			values = []string{strconv.FormatInt(b.Max+1, 10), "1e3", "-1", "0x10"}
			if b.Min > 0 {
				values = append(values, strconv.FormatInt(b.Min-1, 10))
			}
		case knobs.KindCPUList:
			values = []string{"3-1", "0-" + strconv.Itoa(knobs.MaxCPU+1), "ff", "0,,1"}
		}
		for _, v := range values {
			cases = append(cases, bad{"sysctl-" + n + "=" + v, fmt.Sprintf("sysctls:\n- name: vm.max_map_count\n  value: \"1\"\n- name: %s\n  value: %q", n, v),
				"spec.sysctls[1].value", "sysctl " + n + " value " + v + " is out of bounds: it must be "})
		}
	}
	rt := "rtRuntime must be Unlimited or a duration from 100ms to 990ms"
	whole := "rtRuntime must be a whole number of microseconds"
	quorum := "at least one housekeeping CPU for every 16 isolated ones"
	cpu0 := "cpus.isolated includes CPU 0"
	empty := "nodeSelector must not be empty"
	canary := "bootParameters.policy Reboot needs rollout with a canary"
	grant := "rollout needs a non-empty measurement.namespaceSelector"
	reboot := isolatedCPUs + "bootParameters:\n  policy: Reboot\n"
	cases = append(cases,
		bad{"rt-zero", "scheduler:\n  rtRuntime: 0s", "spec.scheduler.rtRuntime", rt},
		bad{"rt-below-floor", "scheduler:\n  rtRuntime: 99999us", "spec.scheduler.rtRuntime", rt},
		bad{"rt-above-ceiling", "scheduler:\n  rtRuntime: 990001us", "spec.scheduler.rtRuntime", rt},
		bad{"rt-just-under-the-period", "scheduler:\n  rtRuntime: 999999us", "spec.scheduler.rtRuntime", rt},
		bad{"rt-sub-microsecond", "scheduler:\n  rtRuntime: 999ns", "spec.scheduler.rtRuntime", whole},
		bad{"rt-fraction-of-microsecond", "scheduler:\n  rtRuntime: 1.5us", "spec.scheduler.rtRuntime", whole},
		bad{"rt-in-bounds-fraction", "scheduler:\n  rtRuntime: 500000.5us", "spec.scheduler.rtRuntime", whole},
		bad{"rt-in-bounds-nanoseconds", "scheduler:\n  rtRuntime: 950ms1ns", "spec.scheduler.rtRuntime", whole},
		bad{"unlimited-without-isolated", "scheduler:\n  rtRuntime: Unlimited", "spec.scheduler.rtRuntime", "needs cpus.isolated"},
		bad{"one-housekeeping-cpu-for-17", "cpus:\n  reserved: \"0\"\n  isolated: \"1-17\"\n  namespaceSelector: {}", "spec.cpus.reserved", quorum},
		bad{"one-housekeeping-cpu-for-255", "cpus:\n  reserved: \"0\"\n  isolated: \"1-255\"\n  namespaceSelector: {}", "spec.cpus.reserved", quorum},
		bad{"two-for-33-in-pieces", "cpus:\n  reserved: \"0,40\"\n  isolated: \"1-20,21,22-33\"\n  namespaceSelector: {}", "spec.cpus.reserved", quorum},
		bad{"cpu0-isolated", "cpus:\n  reserved: \"4\"\n  isolated: \"0-3\"\n  namespaceSelector: {}", "spec.cpus.isolated", cpu0},
		bad{"cpu0-alone-isolated", "cpus:\n  reserved: \"1\"\n  isolated: \"2,0\"\n  namespaceSelector: {}", "spec.cpus.isolated", cpu0},
		bad{"cpu0-housekeeping", "cpus:\n  reserved: \"4\"\n  isolated: \"0\"\n  cpu0: Housekeeping\n  namespaceSelector: {}", "spec.cpus.isolated", cpu0},
		bad{"node-selector-empty", "nodeSelector: {}", "spec.nodeSelector", empty},
		bad{"node-selector-empty-lists", "nodeSelector:\n  matchLabels: {}\n  matchExpressions: []", "spec.nodeSelector", empty},
		bad{"reboot-without-rollout", reboot, "spec.rollout", canary},
		bad{"reboot-rollout-without-canary", reboot + measured + "rollout:\n  maxInFlight: 1", "spec.rollout", canary},
		bad{"reboot-canary-everything", reboot + measured + "rollout:\n  canary:\n    nodes: \"100%\"", "spec.rollout.canary.nodes", "canary smaller than the selection"},
		bad{"rollout-without-measurement", "rollout:\n  canary:\n    nodes: 1", "spec.measurement.namespaceSelector", grant},
		bad{"rollout-measurement-no-grant", "measurement:\n  interval: 30s\nrollout: {}", "spec.measurement.namespaceSelector", grant},
		bad{"rollout-measurement-grant-everything", "measurement:\n  namespaceSelector: {}\nrollout: {}", "spec.measurement.namespaceSelector", grant},
		bad{"rollout-pods-grant-everything", "measurement:\n  podSelector:\n    matchLabels: {tier: latency}\n  namespaceSelector:\n    matchLabels: {}\nrollout: {}", "spec.measurement.namespaceSelector", grant},
		bad{"rollout-one-sample", measured + "rollout:\n  minSamples: 1", "spec.rollout.minSamples", strconv.Itoa(v1alpha1.MinSamplesFloor)},
		bad{"rollout-reboot-back-unknown", measured + "rollout:\n  rebootBack: Always", "spec.rollout.rebootBack", "Pause"},
		bad{"burst-percent-zero", "cpuQuota:\n  policy: Burst\n  burstPercent: 0\n  namespaceSelector: {}", "spec.cpuQuota.burstPercent", "should be greater than or equal to 1"},
		bad{"burst-percent-above-the-quota", "cpuQuota:\n  policy: Burst\n  burstPercent: 101\n  namespaceSelector: {}", "spec.cpuQuota.burstPercent", "should be less than or equal to 100"},
		bad{"burst-percent-with-remove", "cpuQuota:\n  burstPercent: 50\n  namespaceSelector: {}", "spec.cpuQuota", "burstPercent applies only to cpuQuota.policy Burst"},
		bad{"burst-without-grant", "cpuQuota:\n  policy: Burst", "spec.cpuQuota", "namespaceSelector is required"},
		bad{"contention-wait-under-floor", "measurement:\n  contention:\n    waitPerSecond: 14999us", "spec.measurement.contention.waitPerSecond", "between 15ms and 10s"},
		bad{"contention-wait-over-10s", "measurement:\n  contention:\n    waitPerSecond: 10001ms", "spec.measurement.contention.waitPerSecond", "between 15ms and 10s"},
		bad{"contention-raise-after-one", "measurement:\n  contention:\n    raiseAfterWindows: 1", "spec.measurement.contention.raiseAfterWindows", "greater than or equal to 2"},
		bad{"contention-raise-after-61", "measurement:\n  contention:\n    raiseAfterWindows: 61", "spec.measurement.contention.raiseAfterWindows", "less than or equal to 60"},
		bad{"contention-clear-after-zero", "measurement:\n  contention:\n    clearAfterWindows: 0", "spec.measurement.contention.clearAfterWindows", "greater than or equal to 1"},
		bad{"contention-clear-after-121", "measurement:\n  contention:\n    clearAfterWindows: 121", "spec.measurement.contention.clearAfterWindows", "less than or equal to 120"},
		bad{"contention-taint-noschedule", "measurement:\n  contention:\n    taint: NoSchedule", "spec.measurement.contention.taint", "supported values"},
		bad{"contention-taint-noexecute", "measurement:\n  contention:\n    taint: NoExecute", "spec.measurement.contention.taint", "supported values"},
		bad{"contention-max-tainted-zero", "measurement:\n  contention:\n    taint: PreferNoSchedule\n    maxTaintedPercent: 0", "spec.measurement.contention.maxTaintedPercent", "greater than or equal to 1"},
		bad{"contention-max-tainted-101", "measurement:\n  contention:\n    taint: PreferNoSchedule\n    maxTaintedPercent: 101", "spec.measurement.contention.maxTaintedPercent", "less than or equal to 100"},
		bad{"contention-max-tainted-without-taint", "measurement:\n  contention:\n    maxTaintedPercent: 50", "spec.measurement.contention", "maxTaintedPercent needs taint PreferNoSchedule"},
		bad{"contention-max-tainted-with-none", "measurement:\n  contention:\n    taint: None\n    maxTaintedPercent: 50", "spec.measurement.contention", "maxTaintedPercent needs taint PreferNoSchedule"},
	)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := selector + tc.spec
			if strings.HasPrefix(tc.spec, "nodeSelector:") {
				spec = tc.spec
			}
			obj := profile(t, fmt.Sprintf("bounded-%d", i), spec)
			err := k8s.Create(context.Background(), obj)
			if err == nil {
				_ = k8s.Delete(context.Background(), obj)
				t.Fatalf("API server accepted:\n%s", spec)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, w := range []string{tc.field, tc.why} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message does not name %q:\n%v", w, err)
				}
			}
		})
	}
}

// The other side of each rule: the ends of every range and the least
// each rule asks for are accepted.
func TestBoundedProfilesAtTheEdgesAreAccepted(t *testing.T) {
	var low, high strings.Builder
	low.WriteString("sysctls:\n")
	high.WriteString("sysctls:\n")
	for _, n := range knobs.Allowed() {
		b, _ := knobs.BoundsOf(n)
		lo, hi := strconv.FormatInt(b.Min, 10), strconv.FormatInt(b.Max, 10)
		if b.Kind == knobs.KindCPUList {
			lo, hi = "0", "0,2-4,"+strconv.Itoa(knobs.MaxCPU)
		}
		fmt.Fprintf(&low, "- name: %s\n  value: %q\n", n, lo)
		fmt.Fprintf(&high, "- name: %s\n  value: %q\n", n, hi)
	}
	specs := map[string]string{
		"sysctls-at-min":     low.String(),
		"sysctls-at-max":     high.String(),
		"unlocked-unbounded": "sysctls:\n- name: vm.max_map_count\n  value: \"2147483647\"\n",
		"rt-floor":           "scheduler:\n  rtRuntime: 100ms",
		"rt-ceiling":         "scheduler:\n  rtRuntime: 990000us",
		"rt-mixed-whole-us":  "scheduler:\n  rtRuntime: 900ms500us",
		"rt-fraction-of-ms":  "scheduler:\n  rtRuntime: 950.001ms",
		"rt-unlimited":       "scheduler:\n  rtRuntime: Unlimited\n" + isolatedCPUs,
		"sixteen-per-cpu":    "cpus:\n  reserved: \"0\"\n  isolated: \"1-16\"\n  namespaceSelector: {}",
		"two-for-32":         "cpus:\n  reserved: \"0,40\"\n  isolated: \"1-20,21,22-32\"\n  namespaceSelector: {}",
		"reserved-only":      "cpus:\n  reserved: \"0\"",
		"cpu0-isolatable":    "cpus:\n  reserved: \"4\"\n  isolated: \"0-3\"\n  cpu0: Isolatable\n  namespaceSelector: {}",
		"cpu0-housekeeping":  "cpus:\n  reserved: \"0\"\n  isolated: \"1-3\"\n  cpu0: Housekeeping\n  namespaceSelector: {}",
		"reboot-count":       isolatedCPUs + "bootParameters:\n  policy: Reboot\n" + canaryRollout,
		"reboot-percent":     isolatedCPUs + "bootParameters:\n  policy: Reboot\n" + measured + "rollout:\n  canary:\n    nodes: \"99%\"",
		"reboot-selector":    isolatedCPUs + "bootParameters:\n  policy: Reboot\n" + measured + "rollout:\n  canary:\n    selector:\n      matchLabels: {canary: \"\"}",
		"report-only":        isolatedCPUs + "bootParameters:\n  policy: ReportOnly\n",
		"burst-default":      "cpuQuota:\n  policy: Burst\n  namespaceSelector: {}",
		"burst-floor":        "cpuQuota:\n  policy: Burst\n  burstPercent: 1\n  namespaceSelector: {}",
		"burst-ceiling":      "cpuQuota:\n  policy: Burst\n  burstPercent: 100\n  namespaceSelector: {}",
		"contention-at-min":  "measurement:\n  contention:\n    waitPerSecond: 15ms\n    raiseAfterWindows: 2\n    clearAfterWindows: 1",
		"contention-at-max":  "measurement:\n  contention:\n    waitPerSecond: 10s\n    raiseAfterWindows: 60\n    clearAfterWindows: 120",
		"contention-taint":   "measurement:\n  contention:\n    taint: PreferNoSchedule",
		"contention-taint-1": "measurement:\n  contention:\n    taint: PreferNoSchedule\n    maxTaintedPercent: 1",
		"contention-all":     "measurement:\n  contention:\n    taint: PreferNoSchedule\n    maxTaintedPercent: 100",
		"contention-none":    "measurement:\n  contention:\n    taint: None",
		"rollout-expression": "measurement:\n  namespaceSelector:\n    matchExpressions:\n    - {key: kubernetes.io/metadata.name, operator: In, values: [gateway]}\nrollout:\n  minSamples: 20\n  rebootBack: Automatic",
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			obj := profile(t, "edge-"+name, selector+spec)
			if err := k8s.Create(context.Background(), obj); err != nil {
				t.Fatalf("valid profile rejected: %v\n%s", err, spec)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
		})
	}
	// A selector by expression only is not empty.
	obj := profile(t, "edge-expression-selector", "nodeSelector:\n  matchExpressions:\n  - {key: tier, operator: Exists}\n")
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("a selector by expression rejected: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

// LatencyNode embeds the same TuningSpec: a hand-written one (or one from a
// stolen manager token) meets the same bounds.
func TestLatencyNodeValuesAreBounded(t *testing.T) {
	for i, tc := range []struct {
		tuning      v1alpha1.TuningSpec
		field, want string
	}{
		{v1alpha1.TuningSpec{Sysctls: []v1alpha1.Sysctl{{Name: "net.core.netdev_max_backlog", Value: "100000000"}}},
			"spec.tuning.sysctls[0].value", "sysctl net.core.netdev_max_backlog value 100000000 is out of bounds"},
		{v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{RTRuntime: ptrTo("0s")}}, "spec.tuning.scheduler.rtRuntime", "from 100ms to 990ms"},
		{v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Reserved: ptrTo("0"), Isolated: ptrTo("1-63"), NamespaceSelector: &v1alpha1.NamespaceSelector{}}},
			"spec.tuning.cpus.reserved", "every 16 isolated"},
	} {
		ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bounded-%d", i)},
			Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "p", Tuning: tc.tuning}}
		err := k8s.Create(context.Background(), ln)
		if err == nil {
			_ = k8s.Delete(context.Background(), ln)
			t.Errorf("API server accepted a LatencyNode with %+v", tc.tuning)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("message does not name %s and %q: %v", tc.field, tc.want, err)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// One table for the fixed numbers the markers repeat: the rtRuntime rule,
// the sizing rule and the minSamples floor in the generated CRD are the
// ones the Go constants (which the agent and manager use) give.
func TestCRDRulesMatchTheConstants(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "tuning.latencytier.io_latencyprofiles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	spec := dig(t, crd, "spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec")
	rules := func(v any) string {
		var out []string
		for _, r := range v.(map[string]any)["x-kubernetes-validations"].([]any) {
			out = append(out, fmt.Sprint(r.(map[string]any)["rule"]))
		}
		return strings.Join(out, "\n")
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("duration('%dms')", d.Milliseconds()) }
	rt := rules(dig(t, spec, "properties", "scheduler", "properties", "rtRuntime"))
	for _, want := range []string{
		"duration(self) >= " + ms(v1alpha1.RTRuntimeMin) + " && duration(self) <= " + ms(v1alpha1.RTRuntimeMax),
		fmt.Sprintf("int(duration(self)) %% %d == 0", v1alpha1.RTRuntimeUnit.Nanoseconds()),
	} {
		if !strings.Contains(rt, want) {
			t.Errorf("rtRuntime rules lack %q (from the Go constants):\n%s", want, rt)
		}
	}
	if !strings.Contains(rules(dig(t, spec, "properties", "cpus")), fmt.Sprintf(".sum() * %d >= ", v1alpha1.IsolatedPerReservedCPU)) {
		t.Errorf("the cpus sizing rule does not use IsolatedPerReservedCPU = %d", v1alpha1.IsolatedPerReservedCPU)
	}
	if got := fmt.Sprint(dig(t, spec, "properties", "rollout", "properties", "minSamples", "minimum")); got != strconv.Itoa(v1alpha1.MinSamplesFloor) {
		t.Errorf("rollout.minSamples minimum %s, MinSamplesFloor %d", got, v1alpha1.MinSamplesFloor)
	}
	burst := dig(t, spec, "properties", "cpuQuota", "properties", "burstPercent").(map[string]any)
	if lo, hi := fmt.Sprint(burst["minimum"]), fmt.Sprint(burst["maximum"]); lo != strconv.Itoa(v1alpha1.BurstPercentMin) || hi != strconv.Itoa(v1alpha1.BurstPercentMax) {
		t.Errorf("cpuQuota.burstPercent bounds %s..%s, the constants %d..%d", lo, hi, v1alpha1.BurstPercentMin, v1alpha1.BurstPercentMax)
	}
	// measurement.contention: its floor is the one every contention
	// judgement uses (ContentionMinWaitPerSecond), its bounds and defaults
	// the constants the agent resolves a spec with.
	cont := dig(t, spec, "properties", "measurement", "properties", "contention", "properties")
	if r := rules(dig(t, cont, "waitPerSecond")); !strings.Contains(r, "duration(self) >= "+ms(v1alpha1.ContentionMinWaitPerSecond)+" && duration(self) <= duration('"+
		strconv.FormatInt(int64(v1alpha1.ContentionMaxWaitPerSecond/time.Second), 10)+"s')") {
		t.Errorf("contention.waitPerSecond rule %q is not ContentionMinWaitPerSecond %v .. ContentionMaxWaitPerSecond %v", r,
			v1alpha1.ContentionMinWaitPerSecond, v1alpha1.ContentionMaxWaitPerSecond)
	}
	wait := time.Duration(figures.WaitFloor)
	// measurement.budgets: the same wait bounds (the agent judges a
	// budget outside them as InvalidBudget), and MaxPodBudgets.
	budgets := dig(t, spec, "properties", "measurement", "properties", "budgets")
	if r := rules(dig(t, budgets, "items", "properties", "waitPerSecond")); !strings.Contains(r, "duration(self) >= "+ms(wait)+" && duration(self) <= duration('"+
		strconv.FormatInt(int64(v1alpha1.ContentionMaxWaitPerSecond/time.Second), 10)+"s')") {
		t.Errorf("budgets waitPerSecond rule %q is not figures.WaitFloor %v .. ContentionMaxWaitPerSecond %v", r, wait, v1alpha1.ContentionMaxWaitPerSecond)
	}
	if r := rules(dig(t, budgets, "items", "properties", "runQueueP99")); !strings.Contains(r, "duration(self) >= duration('"+
		strconv.FormatInt(int64(v1alpha1.PodBudgetMinRunQueueP99/time.Microsecond), 10)+"us') && duration(self) <= duration('"+
		strconv.FormatInt(int64(v1alpha1.PodBudgetMaxRunQueueP99/time.Second), 10)+"s')") {
		t.Errorf("budgets runQueueP99 rule %q is not PodBudgetMinRunQueueP99 %v .. PodBudgetMaxRunQueueP99 %v", r,
			v1alpha1.PodBudgetMinRunQueueP99, v1alpha1.PodBudgetMaxRunQueueP99)
	}
	if got := fmt.Sprint(budgets.(map[string]any)["maxItems"]); got != strconv.Itoa(v1alpha1.MaxPodBudgets) {
		t.Errorf("measurement.budgets maxItems %s, MaxPodBudgets %d", got, v1alpha1.MaxPodBudgets)
	}
	if got := fmt.Sprint(dig(t, cont, "waitPerSecond", "default")); got != v1alpha1.ContentionDefaultWaitPerSecond.String() {
		t.Errorf("contention.waitPerSecond default %s, ContentionDefaultWaitPerSecond %v", got, v1alpha1.ContentionDefaultWaitPerSecond)
	}
	for _, c := range []struct {
		field             string
		lo, hi, defaultTo int
	}{
		{"raiseAfterWindows", v1alpha1.ContentionMinRaiseAfter, v1alpha1.ContentionMaxRaiseAfter, v1alpha1.ContentionDefaultRaiseAfter},
		{"clearAfterWindows", v1alpha1.ContentionMinClearAfter, v1alpha1.ContentionMaxClearAfter, v1alpha1.ContentionDefaultClearAfter},
	} {
		got := fmt.Sprint(dig(t, cont, c.field, "minimum"), " ", dig(t, cont, c.field, "maximum"), " ", dig(t, cont, c.field, "default"))
		if want := fmt.Sprint(c.lo, " ", c.hi, " ", c.defaultTo); got != want {
			t.Errorf("contention.%s minimum, maximum, default %s; the constants say %s", c.field, got, want)
		}
	}
	// maxTaintedPercent has no schema default (the manager applies it):
	// one would be written into every stored profile's contention.
	got := fmt.Sprint(dig(t, cont, "maxTaintedPercent", "minimum"), " ", dig(t, cont, "maxTaintedPercent", "maximum"))
	if want := fmt.Sprint(v1alpha1.ContentionMinMaxTaintedPercent, " ", v1alpha1.ContentionMaxMaxTaintedPercent); got != want {
		t.Errorf("contention.maxTaintedPercent minimum, maximum %s; the constants say %s", got, want)
	}
	if d, ok := dig(t, cont, "maxTaintedPercent").(map[string]any)["default"]; ok {
		t.Errorf("contention.maxTaintedPercent has a schema default %v", d)
	}
}

func dig(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("no %s in the CRD", k)
			}
			v = m[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}
