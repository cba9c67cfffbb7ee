package desired_test

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	snap "latencytier.io/latencytier/agent/snapshot"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// The per-node sizing of spec.cpus: on the node's online CPUs, at least one
// housekeeping CPU per 16 isolated ones (reserved, or every online CPU not
// isolated where reserved is not given), and CPU 0 isolated only when
// cpus.cpu0 is Isolatable. A refusal is Invalid and names the field and the
// numbers.
func TestCheckSizing(t *testing.T) {
	cases := []struct {
		name               string
		online             string
		reserved, isolated *string
		cpu0               v1alpha1.CPU0Policy
		want               []string // parts of the message; nil: the sizing holds
	}{
		{"no-isolated", "0-255", ptr.To("0"), nil, "", nil},
		{"16-per-reserved", "0-16", ptr.To("0"), ptr.To("1-16"), "", nil},
		{"17-need-2", "0-17", ptr.To("0"), ptr.To("1-17"), "",
			[]string{"spec.cpus.isolated \"1-17\" isolates 17 online CPUs", "at least 2 housekeeping CPUs", "spec.cpus.reserved \"0\" leaves 1 online (CPUs 0)"}},
		{"255-on-one", "0-255", ptr.To("0"), ptr.To("1-255"), "",
			[]string{"isolates 255 online CPUs", "at least 16 housekeeping", "leaves 1 online"}},
		{"255-on-16", "0-255", ptr.To("0-15"), ptr.To("16-255"), "", nil},
		// Only the node's online CPUs count: a list written for a bigger
		// machine isolates 3 here, and its reserved CPU 64 is not here.
		{"offline-isolated-not-counted", "0-3", ptr.To("0"), ptr.To("1-63"), "", nil},
		{"offline-reserved-not-counted", "0-17", ptr.To("0,64"), ptr.To("1-17"), "",
			[]string{"at least 2 housekeeping", "spec.cpus.reserved \"0,64\" leaves 1 online (CPUs 0)"}},
		// Reported by the online check instead (cpus/reserved Invalid).
		{"no-reserved-cpu-online", "0-3", ptr.To("64"), ptr.To("1-3"), "", nil},
		{"no-reserved-rest-is-housekeeping", "0-17", nil, ptr.To("2-17"), "", nil},
		{"no-reserved-too-few-left", "0-17", nil, ptr.To("1-17"), "",
			[]string{"at least 2 housekeeping", "the online CPUs not in spec.cpus.isolated leaves 1 online (CPUs 0)"}},
		{"cpu0-housekeeping-by-default", "0-3", ptr.To("3"), ptr.To("0-2"), "",
			[]string{"spec.cpus.isolated \"0-2\" holds CPU 0", "spec.cpus.cpu0 is Isolatable"}},
		{"cpu0-housekeeping-explicit", "0-3", ptr.To("3"), ptr.To("0-2"), v1alpha1.CPU0Housekeeping, []string{"holds CPU 0"}},
		{"cpu0-isolatable", "0-3", ptr.To("3"), ptr.To("0-2"), v1alpha1.CPU0Isolatable, nil},
		{"cpu0-isolatable-still-sized", "0-33", ptr.To("33"), ptr.To("0-32"), v1alpha1.CPU0Isolatable, []string{"at least 3 housekeeping"}},
		{"not-a-cpulist-reported-elsewhere", "0-3", ptr.To("0"), ptr.To("x"), "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := &v1alpha1.CPUSpec{Reserved: tc.reserved, Isolated: tc.isolated, CPU0: tc.cpu0}
			online, err := cpuset.Parse(tc.online)
			if err != nil {
				t.Fatal(err)
			}
			r := desired.CheckSizing(online, snap.ParseCPUs(spec), spec)
			if tc.want == nil {
				if r != nil {
					t.Fatalf("refused: %+v", r)
				}
				return
			}
			if r == nil || r.State != v1alpha1.SettingInvalid || r.Setting != desired.SettingCPUSizing {
				t.Fatalf("result %+v, want Invalid %s", r, desired.SettingCPUSizing)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Message, w) {
					t.Errorf("message %q does not say %q", r.Message, w)
				}
			}
		})
	}
}

// An undersized spec.cpus degrades the cpus settings on the node, not the
// tier: no cpuset or IRQ knob, an Invalid cpus/sizing result, and the
// rest of the profile (a scheduler knob here) is still rendered, a pod asking
// for real-time is refused; the boot plan
// stages no isolation arguments and says why.
func TestUndersizedCPUsDegradeOnlyTheCPUSettings(t *testing.T) {
	files := twoCPUHost()
	files["sys/devices/system/cpu/online"] = "0-17"
	files["proc/sys/kernel/sched_autogroup_enabled"] = "1"
	root := testroot.New(t, files)
	spec := v1alpha1.TuningSpec{
		CPUs:      &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("1-17")},
		IRQ:       &v1alpha1.IRQSpec{Affinity: v1alpha1.IRQAffinityReserved},
		Scheduler: &v1alpha1.SchedulerSpec{Autogroup: ptr.To(v1alpha1.Disabled)},
	}
	spec.Realtime = &v1alpha1.RealtimeSpec{NamespaceSelector: &v1alpha1.NamespaceSelector{}}
	pod := podcgroup.Pod{UID: "u1", Namespace: "tenant", Name: "spin", NamespaceLabels: map[string]string{},
		Annotations: map[string]string{v1alpha1.SchedPolicyAnnotation: "fifo:10"}}
	ds := desired.Render(root, sysctl.Layout{}, spec, []podcgroup.Pod{pod}, nil)
	if len(ds.Refusals) != 1 || ds.Refusals[0].Field != rtsched.FieldIsolated || !strings.Contains(ds.Refusals[0].Result.Message, "spec.cpus is Invalid on this node") {
		t.Errorf("refusals %+v, want the real-time pod refused by %s", ds.Refusals, rtsched.FieldIsolated)
	}
	var ids []string
	for _, k := range ds.Knobs {
		ids = append(ids, k.ID)
		if strings.HasPrefix(k.ID, "cpuset") || strings.HasPrefix(k.ID, "irq") {
			t.Errorf("knob %s rendered for an undersized spec.cpus", k.ID)
		}
	}
	if len(ids) != 1 || ids[0] != "scheduler/autogroup" {
		t.Errorf("knobs %v, want the scheduler's still rendered", ids)
	}
	sized := 0
	for _, r := range ds.Results {
		if r.Setting == desired.SettingCPUSizing && r.State == v1alpha1.SettingInvalid && strings.Contains(r.Message, "spec.cpus.reserved") {
			sized++
		}
	}
	if sized != 1 {
		t.Errorf("results %+v, want one Invalid %s naming spec.cpus.reserved", ds.Results, desired.SettingCPUSizing)
	}
	b := desired.PlanBoot(root, spec, "p", nil)
	for _, a := range b.Args {
		if a.Key == "nohz_full" || a.Key == "isolcpus" || a.Key == "rcu_nocbs" {
			t.Errorf("boot plan holds %s for an undersized spec.cpus", a)
		}
	}
	if !strings.Contains(b.Status.Message, "no CPU isolation arguments") || !strings.Contains(b.Status.Message, "at least 2 housekeeping") {
		t.Errorf("boot status %+v, want it to say why", b.Status)
	}
}
