package main

import (
	"testing"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A summarised IRQ line (count 256) counts as 256 settings, also when it
// failed.
func TestSettingCountsFollowSummarisedIRQs(t *testing.T) {
	n := &v1alpha1.LatencyNode{Status: v1alpha1.LatencyNodeStatus{Settings: []v1alpha1.SettingResult{
		{Setting: "irq/50-51", State: v1alpha1.SettingFailed, Count: 2},
		{Setting: "irq/24-279", State: v1alpha1.SettingApplied, Count: 256},
		{Setting: "scheduler/autogroup", State: v1alpha1.SettingApplied}}}}
	if got := settingsSummary(n); got != "2 Failed, 257 Applied" {
		t.Errorf("settingsSummary = %q", got)
	}
	if got := failedSettings(n); got != 2 {
		t.Errorf("failedSettings = %d, want 2", got)
	}
}

// A scheduler the kernel ejected (Fallback) is a setting the node could
// not hold: the node reads Degraded even before its Applied condition
// catches up.
func TestFallbackCountsAsFailed(t *testing.T) {
	n := &v1alpha1.LatencyNode{Status: v1alpha1.LatencyNodeStatus{Settings: []v1alpha1.SettingResult{
		{Setting: "scheduler/class", State: v1alpha1.SettingFallback},
		{Setting: "scheduler/autogroup", State: v1alpha1.SettingApplied}}}}
	if got := failedSettings(n); got != 1 {
		t.Errorf("failedSettings = %d, want 1", got)
	}
	if got := nodeState(n, verdicts{}); got != "Degraded" {
		t.Errorf("state = %q, want Degraded", got)
	}
}
