package main

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// explain names each other writer that owns settings, the settings it
// owns, and what to configure there instead; a node with none has no such
// section.
func TestExplainNamesOwners(t *testing.T) {
	n := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "w-1"}}
	n.Status.Settings = []v1alpha1.SettingResult{
		{Setting: "cpuset/system.slice", Desired: "0-1", State: v1alpha1.SettingOwnedBy, Owner: "dra-driver-cpu (pid 4242)",
			Message: "dra-driver-cpu (pid 4242) placed container app of pod team/a on CPUs 1; the agent leaves it: configure the DRA CPU driver"},
		{Setting: "irq/24-31", Desired: "0-1", State: v1alpha1.SettingOwnedBy, Owner: "dra-driver-cpu (pid 4242)", Count: 8},
		{Setting: "sysctl/kernel.sched_rt_runtime_us", State: v1alpha1.SettingOwnedBy, Owner: "tuned (pid 9, profile realtime)",
			Message: "tuned owns it; set it in the TuneD profile"},
		{Setting: "scheduler/autogroup", State: v1alpha1.SettingApplied},
	}
	var out bytes.Buffer
	if err := explain(&out, n, verdicts{}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"Owned by other writers",
		"dra-driver-cpu (pid 4242): 9 setting(s): cpuset/system.slice, irq/24-31\n    dra-driver-cpu (pid 4242) placed container app of pod team/a on CPUs 1; the agent leaves it: configure the DRA CPU driver",
		"tuned (pid 9, profile realtime): 1 setting(s): sysctl/kernel.sched_rt_runtime_us\n    tuned owns it; set it in the TuneD profile",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("explain lacks %q:\n%s", want, got)
		}
	}
	n.Status.Settings = n.Status.Settings[3:]
	out.Reset()
	if err := explain(&out, n, verdicts{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "Owned by") {
		t.Errorf("explain has an owners section without owned settings:\n%s", out.String())
	}
}
