package sysctl

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// ID is the setting ID of a typed field (tests name locals "knobs").
var ID = knobs.SchedulerID

func fullSpec() *v1alpha1.SchedulerSpec {
	dis := v1alpha1.Disabled
	d := func(s string) *metav1.Duration {
		v, _ := time.ParseDuration(s)
		return &metav1.Duration{Duration: v}
	}
	rt := "Unlimited"
	return &v1alpha1.SchedulerSpec{Autogroup: &dis, NumaBalancing: &dis, MigrationCost: d("5ms"),
		BaseSlice: d("3ms"), Latency: d("12ms"), WakeupGranularity: d("8ms"), RTRuntime: &rt}
}

var procKnobs = map[string]string{
	"proc/sys/kernel/sched_autogroup_enabled": "1",
	"proc/sys/kernel/numa_balancing":          "1",
	"proc/sys/kernel/sched_rt_runtime_us":     "950000",
}

func layoutFiles(release string, extra map[string]string) map[string]string {
	files := map[string]string{"proc/sys/kernel/osrelease": release}
	for k, v := range procKnobs {
		files[k] = v
	}
	for k, v := range extra {
		files[k] = v
	}
	return files
}

func byID(knobs []knob.Knob) map[string]knob.Knob {
	out := map[string]knob.Knob{}
	for _, k := range knobs {
		out[k.ID] = k
	}
	return out
}

func resultsByID(rs []v1alpha1.SettingResult) map[string]v1alpha1.SettingResult {
	out := map[string]v1alpha1.SettingResult{}
	for _, r := range rs {
		out[r.Setting] = r
	}
	return out
}

func TestLayouts(t *testing.T) {
	cases := []struct {
		name    string
		release string
		files   map[string]string
		mount   bool
		eevdf   bool
		// want maps field → path relative to the root ("" = Unsupported)
		want map[string]string
		// unsupportedHas maps field → a phrase the Unsupported message holds
		unsupportedHas map[string]string
	}{
		{
			name: "5.10 CFS, knobs in /proc/sys", release: "5.10.0-21-amd64",
			files: map[string]string{
				"proc/sys/kernel/sched_latency_ns": "24000000", "proc/sys/kernel/sched_min_granularity_ns": "3000000",
				"proc/sys/kernel/sched_wakeup_granularity_ns": "4000000", "proc/sys/kernel/sched_migration_cost_ns": "500000",
			},
			want: map[string]string{"autogroup": "proc/sys/kernel/sched_autogroup_enabled", "numaBalancing": "proc/sys/kernel/numa_balancing",
				"migrationCost": "proc/sys/kernel/sched_migration_cost_ns", "baseSlice": "proc/sys/kernel/sched_min_granularity_ns",
				"latency": "proc/sys/kernel/sched_latency_ns", "wakeupGranularity": "proc/sys/kernel/sched_wakeup_granularity_ns",
				"rtRuntime": "proc/sys/kernel/sched_rt_runtime_us"},
		},
		{
			name: "5.15 CFS, knobs in debugfs", release: "5.15.0-91-generic", mount: true,
			files: map[string]string{
				"sys/kernel/debug/sched/latency_ns": "24000000", "sys/kernel/debug/sched/min_granularity_ns": "3000000",
				"sys/kernel/debug/sched/wakeup_granularity_ns": "4000000", "sys/kernel/debug/sched/migration_cost_ns": "500000",
			},
			want: map[string]string{"migrationCost": "sys/kernel/debug/sched/migration_cost_ns", "baseSlice": "sys/kernel/debug/sched/min_granularity_ns",
				"latency": "sys/kernel/debug/sched/latency_ns", "wakeupGranularity": "sys/kernel/debug/sched/wakeup_granularity_ns"},
		},
		{
			name: "6.6 EEVDF: base_slice_ns, no latency or wakeup granularity", release: "6.6.8", mount: true, eevdf: true,
			files: map[string]string{"sys/kernel/debug/sched/base_slice_ns": "3000000", "sys/kernel/debug/sched/migration_cost_ns": "500000"},
			want: map[string]string{"migrationCost": "sys/kernel/debug/sched/migration_cost_ns", "baseSlice": "sys/kernel/debug/sched/base_slice_ns",
				"latency": "", "wakeupGranularity": ""},
			unsupportedHas: map[string]string{"latency": "EEVDF", "wakeupGranularity": "EEVDF"},
		},
		{
			name: "6.8 without debugfs, not mounted in a dry run", release: "6.8.0", eevdf: true,
			want:           map[string]string{"baseSlice": "", "migrationCost": "", "latency": ""},
			unsupportedHas: map[string]string{"baseSlice": "debugfs is not mounted", "latency": "EEVDF"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := testroot.New(t, layoutFiles(tc.release, tc.files))
			l, _ := Probe(root, tc.mount)
			if l.EEVDF != tc.eevdf {
				t.Fatalf("EEVDF = %v, want %v", l.EEVDF, tc.eevdf)
			}
			knobs, results := Knobs(root, l, fullSpec(), nil, nil)
			ks, rs := byID(knobs), resultsByID(results)
			for field, rel := range tc.want {
				k, ok := ks[ID(field)]
				if rel == "" {
					r := rs[ID(field)]
					if ok || r.State != v1alpha1.SettingUnsupported {
						t.Errorf("%s: knob %v result %+v, want Unsupported", field, ok, r)
					}
					if has := tc.unsupportedHas[field]; !strings.Contains(r.Message, has) {
						t.Errorf("%s: message %q lacks %q", field, r.Message, has)
					}
					continue
				}
				if !ok || k.Path != root.Path(rel) {
					t.Errorf("%s: knob %+v, want path %s", field, k, rel)
				}
			}
		})
	}
}

func TestValues(t *testing.T) {
	root := testroot.New(t, layoutFiles("5.10.0", map[string]string{
		"proc/sys/kernel/sched_latency_ns": "1", "proc/sys/kernel/sched_min_granularity_ns": "1",
		"proc/sys/kernel/sched_wakeup_granularity_ns": "1", "proc/sys/kernel/sched_migration_cost_ns": "1",
	}))
	l, _ := Probe(root, false)
	ks := byID(func() []knob.Knob { k, _ := Knobs(root, l, fullSpec(), nil, nil); return k }())
	want := map[string]string{"autogroup": "0", "numaBalancing": "0", "migrationCost": "5000000", "baseSlice": "3000000",
		"latency": "12000000", "wakeupGranularity": "8000000", "rtRuntime": "-1"}
	for f, v := range want {
		if ks[ID(f)].Desired != v {
			t.Errorf("%s = %q, want %q", f, ks[ID(f)].Desired, v)
		}
	}
	if v, _ := rtRuntimeValue("950ms"); v != "950000" {
		t.Errorf("rtRuntimeValue(950ms) = %s", v)
	}
}

func TestRawSysctls(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/sys/net/ipv4/tcp_rmem": "4096\t131072\t6291456"})
	knobs, results := Knobs(root, Layout{}, nil, []v1alpha1.Sysctl{
		{Name: "net.ipv4.tcp_rmem", Value: "4096 131072 6291456"},
		{Name: "net.core.busy_poll", Value: "50"},
		{Name: "kernel/../../etc/passwd", Value: "x"},
		{Name: "net.ipv4", Value: "1"},
	}, knobs.AdminList{"net.", "kernel."})
	if len(knobs) != 1 || !knobs[0].Matches("4096\t131072\t6291456", knobs[0].Desired) {
		t.Fatalf("knobs = %+v; multi-field values must match across whitespace", knobs)
	}
	rs := resultsByID(results)
	if rs["sysctl/net.core.busy_poll"].State != v1alpha1.SettingUnsupported {
		t.Errorf("missing sysctl = %+v", rs["sysctl/net.core.busy_poll"])
	}
	if rs["sysctl/kernel/../../etc/passwd"].State != v1alpha1.SettingInvalid {
		t.Errorf("path-like name = %+v", rs["sysctl/kernel/../../etc/passwd"])
	}
	if rs["sysctl/net.ipv4"].State != v1alpha1.SettingInvalid {
		t.Errorf("directory = %+v", rs["sysctl/net.ipv4"])
	}
}

// Defence in depth for specs that did not pass the CRD (agent apply
// --node-spec): a raw sysctl that names a file a typed field or an earlier
// raw sysctl already manages is refused, not made a second knob on the same
// file (two knobs on one file overwrite each other on every pass).
func TestRawSysctlOnAManagedFileIsInvalid(t *testing.T) {
	root := testroot.New(t, layoutFiles("6.18.0", map[string]string{"proc/sys/vm/swappiness": "60"}))
	dis := v1alpha1.Disabled
	knobs, results := Knobs(root, Layout{EEVDF: true}, &v1alpha1.SchedulerSpec{Autogroup: &dis}, []v1alpha1.Sysctl{
		{Name: "kernel.sched_autogroup_enabled", Value: "1"},
		{Name: "vm.swappiness", Value: "10"},
		{Name: "vm.swappiness", Value: "20"},
	}, nil)
	paths := map[string]string{}
	for _, k := range knobs {
		if other, dup := paths[k.Path]; dup {
			t.Errorf("%s and %s both write %s", other, k.ID, k.Path)
		}
		paths[k.Path] = k.ID
	}
	if len(knobs) != 2 || knobs[0].ID != ID("autogroup") || knobs[1].Desired != "10" {
		t.Fatalf("knobs = %+v; want the typed autogroup and the first vm.swappiness", knobs)
	}
	invalid := 0
	for _, r := range results {
		if r.State == v1alpha1.SettingInvalid && strings.Contains(r.Message, "already") {
			invalid++
		}
	}
	if invalid != 2 {
		t.Fatalf("results = %+v; want both duplicates reported Invalid", results)
	}
}
