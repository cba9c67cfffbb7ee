package sysctl

import (
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Raw sysctls that would run a helper as root, could never be reverted, or
// live in a namespace the agent does not share are refused on the node too:
// a LatencyNode written by hand and `agent apply --node-spec` never pass the
// LatencyProfile's admission rules.
func TestRefusedSysctlsAreInvalid(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"proc/sys/kernel/core_pattern":     "core",
		"proc/sys/kernel/modprobe":         "/sbin/modprobe",
		"proc/sys/kernel/modules_disabled": "0",
		"proc/sys/kernel/shmmax":           "18446744073692774399",
		"proc/sys/fs/mqueue/msg_max":       "10",
		"proc/sys/kernel/hostname":         "node",
		"proc/sys/vm/drop_caches":          "0",
		"proc/sys/vm/swappiness":           "60",
	})
	cases := map[string]string{
		"kernel.core_pattern":     "run a program as root",
		"kernel.modprobe":         "run a program as root",
		"kernel.modules_disabled": "cannot be set back",
		"kernel.shmmax":           "IPC or PID namespace",
		"fs.mqueue.msg_max":       "IPC or PID namespace",
		"kernel.hostname":         "not a tuning knob",
		"vm.drop_caches":          "action",
	}
	var raw []v1alpha1.Sysctl
	for name := range cases {
		raw = append(raw, v1alpha1.Sysctl{Name: name, Value: "|/tmp/x %p"})
	}
	raw = append(raw, v1alpha1.Sysctl{Name: "vm.swappiness", Value: "10"})
	knobs, results := Knobs(root, Layout{}, nil, raw)
	if len(knobs) != 1 || knobs[0].ID != "sysctl/vm.swappiness" {
		t.Errorf("knobs = %+v, want only vm.swappiness", knobs)
	}
	rs := resultsByID(results)
	for name, why := range cases {
		r := rs["sysctl/"+name]
		if r.State != v1alpha1.SettingInvalid || !strings.Contains(r.Message, name) || !strings.Contains(r.Message, why) {
			t.Errorf("%s: %+v, want Invalid naming the sysctl and %q", name, r, why)
		}
	}
}

// The CRD forbids raw sysctls that a typed scheduler field owns whether or
// not that field is set; the agent says the same, naming the field.
func TestRawTypedKnobIsInvalidEvenWithoutTheField(t *testing.T) {
	root := testroot.New(t, layoutFiles("5.10.0", map[string]string{"proc/sys/kernel/sched_min_granularity_ns": "3000000"}))
	knobs, results := Knobs(root, Layout{}, nil, []v1alpha1.Sysctl{
		{Name: "kernel.sched_autogroup_enabled", Value: "0"},
		{Name: "kernel.sched_min_granularity_ns", Value: "1000000"},
	})
	if len(knobs) != 0 {
		t.Fatalf("knobs = %+v, want none", knobs)
	}
	rs := resultsByID(results)
	for name, field := range map[string]string{"kernel.sched_autogroup_enabled": "autogroup", "kernel.sched_min_granularity_ns": "baseSlice"} {
		if r := rs["sysctl/"+name]; r.State != v1alpha1.SettingInvalid || !strings.Contains(r.Message, "scheduler."+field) {
			t.Errorf("%s: %+v, want Invalid naming scheduler.%s", name, r, field)
		}
	}
}

// Value length is counted in characters, as the API server's maxLength
// does: 256 two-byte characters pass admission and must pass here too.
func TestValueLengthIsCountedInCharacters(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/sys/kernel/a": "", "proc/sys/kernel/b": "", "proc/sys/kernel/c": ""})
	knobs, results := Knobs(root, Layout{}, nil, []v1alpha1.Sysctl{
		{Name: "kernel.a", Value: strings.Repeat("é", 256)},
		{Name: "kernel.b", Value: strings.Repeat("é", 257)},
		{Name: "kernel.c", Value: "1\x002"},
	})
	if len(knobs) != 1 || knobs[0].ID != "sysctl/kernel.a" {
		t.Errorf("knobs = %+v, want kernel.a (256 characters, 512 bytes)", knobs)
	}
	rs := resultsByID(results)
	for _, id := range []string{"sysctl/kernel.b", "sysctl/kernel.c"} {
		if rs[id].State != v1alpha1.SettingInvalid {
			t.Errorf("%s = %+v, want Invalid", id, rs[id])
		}
	}
}
