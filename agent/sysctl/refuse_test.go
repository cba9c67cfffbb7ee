package sysctl

import (
	"strconv"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// Raw sysctls that would run a helper as root, could never be reverted, or
// live in a namespace the agent does not share are refused on the node too,
// even when the admin's list names them:
// a LatencyNode written by hand and `agent apply --node-spec` never pass the
// LatencyProfile's admission rules.
func TestRefusedSysctlsAreInvalid(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"proc/sys/kernel/core_pattern":       "core",
		"proc/sys/kernel/modprobe":           "/sbin/modprobe",
		"proc/sys/kernel/modules_disabled":   "0",
		"proc/sys/kernel/shmmax":             "18446744073692774399",
		"proc/sys/fs/mqueue/msg_max":         "10",
		"proc/sys/kernel/hostname":           "node",
		"proc/sys/vm/drop_caches":            "0",
		"proc/sys/vm/swappiness":             "60",
		"proc/sys/kernel/sched_rt_period_us": "1000000",
	})
	cases := map[string]string{
		"kernel.core_pattern":       "run a program as root",
		"kernel.modprobe":           "run a program as root",
		"kernel.modules_disabled":   "cannot be set back",
		"kernel.shmmax":             "IPC or PID namespace",
		"fs.mqueue.msg_max":         "IPC or PID namespace",
		"kernel.hostname":           "not a tuning knob",
		"vm.drop_caches":            "action",
		"kernel.sched_rt_period_us": "RT period must not be changed",
	}
	var raw []v1alpha1.Sysctl
	for name := range cases {
		raw = append(raw, v1alpha1.Sysctl{Name: name, Value: "|/tmp/x %p"})
	}
	raw = append(raw, v1alpha1.Sysctl{Name: "vm.swappiness", Value: "10"})
	admin := knobs.AdminList{"kernel.", "fs.", "vm."}
	ks, results := Knobs(root, Layout{}, nil, raw, admin)
	if len(ks) != 1 || ks[0].ID != "sysctl/vm.swappiness" {
		t.Errorf("knobs = %+v, want only vm.swappiness", ks)
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
	}, nil)
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
	ks, results := Knobs(root, Layout{}, nil, []v1alpha1.Sysctl{
		{Name: "kernel.a", Value: strings.Repeat("é", 256)},
		{Name: "kernel.b", Value: strings.Repeat("é", 257)},
		{Name: "kernel.c", Value: "1\x002"},
	}, knobs.AdminList{"kernel.a", "kernel.b", "kernel.c"})
	if len(ks) != 1 || ks[0].ID != "sysctl/kernel.a" {
		t.Errorf("knobs = %+v, want kernel.a (256 characters, 512 bytes)", ks)
	}
	rs := resultsByID(results)
	for _, id := range []string{"sysctl/kernel.b", "sysctl/kernel.c"} {
		if rs[id].State != v1alpha1.SettingInvalid {
			t.Errorf("%s = %+v, want Invalid", id, rs[id])
		}
	}
}

// The agent never trusts its LatencyNode for the allowlist: a sysctl on no
// allowlist is Invalid, naming it and the unlock, and is written only when
// the admin's list names it (exactly or by prefix).
func TestUnallowedSysctlsNeedTheAdminsUnlock(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"proc/sys/vm/panic_on_oom":           "0",
		"proc/sys/kernel/softlockup_panic":   "0",
		"proc/sys/net/ipv4/tcp_fastopen":     "1",
		"proc/sys/net/core/busy_poll":        "0",
		"proc/sys/kernel/randomize_va_space": "2",
	})
	raw := []v1alpha1.Sysctl{{Name: "vm.panic_on_oom", Value: "1"}, {Name: "kernel.softlockup_panic", Value: "1"},
		{Name: "net.ipv4.tcp_fastopen", Value: "3"}, {Name: "net.core.busy_poll", Value: "50"}, {Name: "kernel.randomize_va_space", Value: "0"}}
	ks, results := Knobs(root, Layout{}, nil, raw, nil)
	if len(ks) != 1 || ks[0].ID != "sysctl/net.core.busy_poll" {
		t.Errorf("without an unlock knobs = %+v, want only the allowlisted net.core.busy_poll", ks)
	}
	rs := resultsByID(results)
	for _, n := range []string{"vm.panic_on_oom", "kernel.softlockup_panic", "net.ipv4.tcp_fastopen", "kernel.randomize_va_space"} {
		r := rs["sysctl/"+n]
		if r.State != v1alpha1.SettingInvalid || !strings.Contains(r.Message, "sysctl "+n+" is not on the built-in allowlist") ||
			!strings.Contains(r.Message, knobs.AdminConfigMap) {
			t.Errorf("%s: %+v, want Invalid naming the sysctl and the unlock", n, r)
		}
	}
	ks, results = Knobs(root, Layout{}, nil, raw, knobs.ParseAdminList("vm.panic_on_oom\nnet.ipv4.tcp_*"))
	ids := map[string]bool{}
	for _, k := range ks {
		ids[k.ID] = true
	}
	if len(ks) != 3 || !ids["sysctl/vm.panic_on_oom"] || !ids["sysctl/net.ipv4.tcp_fastopen"] || !ids["sysctl/net.core.busy_poll"] {
		t.Errorf("unlocked knobs = %+v, want vm.panic_on_oom, net.ipv4.tcp_fastopen, net.core.busy_poll", ks)
	}
	if len(results) != 2 {
		t.Errorf("results = %+v, want the two names still locked", results)
	}
}

// The agent holds every allowlisted value to the catalogue's bounds,
// whatever its LatencyNode says (a hand-written one, a stolen manager
// token, agent apply --node-spec): an out-of-bounds value is Invalid, names
// the field, the sysctl and the bounds, and is not written. Values the
// admin unlocked names carry are only length-bounded.
func TestOutOfBoundsValuesAreInvalid(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"proc/sys/net/core/netdev_max_backlog":    "1000",
		"proc/sys/net/core/rps_sock_flow_entries": "0",
		"proc/sys/net/core/busy_poll":             "0",
		"proc/sys/net/core/netdev_budget_usecs":   "2000",
		"proc/sys/vm/dirty_ratio":                 "20",
		"proc/sys/kernel/watchdog_cpumask":        "0-3",
		"proc/sys/vm/swappiness":                  "60",
		"proc/sys/vm/max_map_count":               "65530",
	})
	ks, results := Knobs(root, Layout{}, nil, []v1alpha1.Sysctl{
		{Name: "net.core.netdev_max_backlog", Value: "100000000"},
		{Name: "net.core.rps_sock_flow_entries", Value: "536870912"},
		{Name: "net.core.busy_poll", Value: "2147483647"},
		{Name: "net.core.netdev_budget_usecs", Value: "0"},
		{Name: "vm.dirty_ratio", Value: "0"},
		{Name: "kernel.watchdog_cpumask", Value: "3-0"},
		{Name: "vm.swappiness", Value: "10"},
		{Name: "vm.max_map_count", Value: "2147483647"},
	}, knobs.AdminList{"vm.max_map_count"})
	if len(ks) != 2 || ks[0].ID != "sysctl/vm.swappiness" || ks[1].ID != "sysctl/vm.max_map_count" {
		t.Fatalf("knobs = %+v, want only vm.swappiness and the unlocked vm.max_map_count", ks)
	}
	rs := resultsByID(results)
	for i, name := range []string{"net.core.netdev_max_backlog", "net.core.rps_sock_flow_entries", "net.core.busy_poll",
		"net.core.netdev_budget_usecs", "vm.dirty_ratio", "kernel.watchdog_cpumask"} {
		r := rs["sysctl/"+name]
		field := "spec.tuning.sysctls[" + strconv.Itoa(i) + "].value"
		if r.State != v1alpha1.SettingInvalid || !strings.Contains(r.Message, field) || !strings.Contains(r.Message, "sysctl "+name) || !strings.Contains(r.Message, "must be") {
			t.Errorf("%s: %+v, want Invalid naming %s, the sysctl and the bounds", name, r, field)
		}
	}
}

// spec.tuning.scheduler.rtRuntime is held to the CRD's bounds on the node
// too: no floor let 0 freeze every real-time thread (IRQ threads
// included), a sub-microsecond spelling truncate to 0, and "just under a
// second" leave the rest of the node 1µs a second.
func TestRTRuntimeOutOfBoundsIsInvalid(t *testing.T) {
	for s, want := range map[string]string{
		"0s": "out of bounds", "999ns": "whole number of microseconds", "1.5us": "whole number of microseconds",
		"99ms": "out of bounds", "999999us": "out of bounds", "1s": "out of bounds", "always": "neither Unlimited",
		"100ms": "", "950ms": "", "990ms": "", "Unlimited": "", "950000us": "",
	} {
		root := testroot.New(t, map[string]string{"proc/sys/kernel/sched_rt_runtime_us": "950000"})
		rt := s
		ks, results := Knobs(root, Layout{}, &v1alpha1.SchedulerSpec{RTRuntime: &rt}, nil, nil)
		r := resultsByID(results)[ID("rtRuntime")]
		if want == "" {
			if len(ks) != 1 || len(results) != 0 {
				t.Errorf("rtRuntime %s: knobs %+v results %+v, want it written", s, ks, results)
			}
			continue
		}
		if len(ks) != 0 || r.State != v1alpha1.SettingInvalid || !strings.Contains(r.Message, "spec.tuning.scheduler.rtRuntime") || !strings.Contains(r.Message, want) {
			t.Errorf("rtRuntime %s: knobs %+v result %+v, want Invalid naming the field and %q", s, ks, r, want)
		}
	}
}
