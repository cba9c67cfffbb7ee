package agent

import (
	"strings"
	"testing"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func TestParseSpec(t *testing.T) {
	cases := []struct {
		name, in, profile string
		action            v1alpha1.NodeAction
		autogroup         bool
		err               string
	}{
		{name: "LatencyNode", in: "apiVersion: tuning.latencytier.io/v1alpha1\nkind: LatencyNode\nmetadata: {name: n}\nspec:\n  action: Apply\n  profile: gw\n  tuning:\n    scheduler: {autogroup: Disabled}\n",
			profile: "gw", action: v1alpha1.ActionApply, autogroup: true},
		{name: "bare spec, action defaults to Apply", in: "profile: gw\ntuning:\n  scheduler: {autogroup: Disabled}\n",
			profile: "gw", action: v1alpha1.ActionApply, autogroup: true},
		{name: "revert", in: "action: Revert\n", action: v1alpha1.ActionRevert},
		{name: "LatencyProfile", in: "apiVersion: tuning.latencytier.io/v1alpha1\nkind: LatencyProfile\nmetadata: {name: gateway}\nspec:\n  nodeSelector: {}\n  scheduler: {autogroup: Disabled}\n",
			profile: "gateway", action: v1alpha1.ActionApply, autogroup: true},
		{name: "typo is refused", in: "tuning:\n  schedular: {autogroup: Disabled}\n", err: "unknown field"},
		{name: "other kind", in: "kind: Pod\nspec: {}\n", err: "kind Pod"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := parseSpec([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if spec.Profile != tc.profile || spec.Action != tc.action {
				t.Fatalf("spec = %+v", spec)
			}
			got := spec.Tuning.Scheduler != nil && spec.Tuning.Scheduler.Autogroup != nil && *spec.Tuning.Scheduler.Autogroup == v1alpha1.Disabled
			if got != tc.autogroup {
				t.Fatalf("autogroup parsed = %v, want %v", got, tc.autogroup)
			}
		})
	}
}
