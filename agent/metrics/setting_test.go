package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"latencytier.io/latencytier/agent/cpuquota"
	"latencytier.io/latencytier/agent/cpuset"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// TestSettingSeriesAreBounded: a pod with 200 tuned threads, recreated
// under a new UID, and a pod's quota on two containers make one
// latencytier_setting_state series per kind, pod and state, not one per
// thread, container or UID; a Failed thread shows next to the Applied ones.
// The IDs come from the setting packages' own constructors.
func TestSettingSeriesAreBounded(t *testing.T) {
	c := New(host.New(t.TempDir()))
	var st v1alpha1.LatencyNodeStatus
	add := func(id string, s v1alpha1.SettingState) {
		st.Settings = append(st.Settings, v1alpha1.SettingResult{Setting: id, State: s})
	}
	for _, uid := range []string{"0b7e-old", "9f1c-new"} {
		p := podcgroup.Pod{UID: uid, Namespace: "shop", Name: "gateway-0"}
		for tid := 1000; tid < 1200; tid++ {
			add(fmt.Sprintf("%s/%d@%d", rtsched.PodID(p), tid, 4242+tid), v1alpha1.SettingApplied)
		}
		add(cpuquota.PodID(p), v1alpha1.SettingApplied)
		add(cpuquota.PodID(p)+"/0123456789ab", v1alpha1.SettingApplied)
		add(cpuquota.PodID(p)+"/ba9876543210", v1alpha1.SettingApplied)
		add(cpuset.PodID(p), v1alpha1.SettingApplied)
	}
	st.Settings[7].State = v1alpha1.SettingFailed // one thread
	add("irq/24", v1alpha1.SettingApplied)
	c.Observed(v1alpha1.LatencyNodeSpec{Profile: "gateway"}, st)
	c.Reasserted([]string{cpuquota.PodID(podcgroup.Pod{UID: "9f1c-new", Namespace: "shop", Name: "gateway-0"}) + "/0123456789ab", "irq/24"})

	want := `
# HELP latencytier_setting_state 1 for each state a setting is in (a pod's settings of one kind count as one), 0 for the states it was in before.
# TYPE latencytier_setting_state gauge
latencytier_setting_state{setting="cpuquota/shop/gateway-0",state="Applied"} 1
latencytier_setting_state{setting="cpuset/pod/shop/gateway-0",state="Applied"} 1
latencytier_setting_state{setting="irq/24",state="Applied"} 1
latencytier_setting_state{setting="rtsched/shop/gateway-0",state="Applied"} 1
latencytier_setting_state{setting="rtsched/shop/gateway-0",state="Failed"} 1
# HELP latencytier_drift_reasserts_total Times the agent found a setting (a pod's settings of one kind count as one) changed by something else and wrote it back.
# TYPE latencytier_drift_reasserts_total counter
latencytier_drift_reasserts_total{setting="cpuquota/shop/gateway-0"} 1
latencytier_drift_reasserts_total{setting="irq/24"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "latencytier_setting_state", "latencytier_drift_reasserts_total"); err != nil {
		t.Error(err)
	}

	// The Failed thread recovered: its state goes to 0, not away.
	st.Settings[7].State = v1alpha1.SettingApplied
	c.Observed(v1alpha1.LatencyNodeSpec{Profile: "gateway"}, st)
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP latencytier_setting_state 1 for each state a setting is in (a pod's settings of one kind count as one), 0 for the states it was in before.
# TYPE latencytier_setting_state gauge
latencytier_setting_state{setting="cpuquota/shop/gateway-0",state="Applied"} 1
latencytier_setting_state{setting="cpuset/pod/shop/gateway-0",state="Applied"} 1
latencytier_setting_state{setting="irq/24",state="Applied"} 1
latencytier_setting_state{setting="rtsched/shop/gateway-0",state="Applied"} 1
latencytier_setting_state{setting="rtsched/shop/gateway-0",state="Failed"} 0
`), "latencytier_setting_state"); err != nil {
		t.Error(err)
	}
}

func TestSeriesKey(t *testing.T) {
	for id, want := range map[string]string{
		"scheduler/autogroup":                "scheduler/autogroup",
		"irq/24":                             "irq/24",
		"cpuset/system.slice/AllowedCPUs":    "cpuset/system.slice/AllowedCPUs",
		"cpuquota/shop/gw-0":                 "cpuquota/shop/gw-0", // journals from before the UID
		"cpuquota/shop/gw-0/uid/container":   "cpuquota/shop/gw-0",
		"rtsched/shop/gw-0/uid/17@99":        "rtsched/shop/gw-0",
		"rtsched/shop/gw-0/uid/node-threads": "rtsched/shop/gw-0",
		"cpuset/pod/shop/gw-0/uid":           "cpuset/pod/shop/gw-0",
	} {
		if got := seriesKey(id); got != want {
			t.Errorf("seriesKey(%q) = %q, want %q", id, got, want)
		}
	}
}
