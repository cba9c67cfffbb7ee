package desired

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func TestRenderOrderAndOptIn(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"proc/sys/kernel/sched_autogroup_enabled": "1",
		"proc/irq/default_smp_affinity":           "3",
		"proc/irq/24/smp_affinity_list":           "0-1",
		"sys/fs/cgroup/cgroup.controllers":        "cpuset cpu",
		"sys/fs/cgroup/cgroup.subtree_control":    "cpuset cpu",
		"sys/fs/cgroup/system.slice/cpuset.cpus":  "",
	})
	dis := v1alpha1.Disabled
	res, iso := "0", "1"
	spec := v1alpha1.TuningSpec{
		Scheduler: &v1alpha1.SchedulerSpec{Autogroup: &dis},
		CPUs:      &v1alpha1.CPUSpec{Reserved: &res, Isolated: &iso, NamespaceSelector: &v1alpha1.NamespaceSelector{}},
		IRQ:       &v1alpha1.IRQSpec{Affinity: v1alpha1.IRQAffinityReserved},
		CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove, NamespaceSelector: &v1alpha1.NamespaceSelector{},
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gw"}}},
	}
	pods := []podcgroup.Pod{
		{UID: "1", Namespace: "a", Name: "annotated", Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}},
		{UID: "2", Namespace: "a", Name: "labelled", Labels: map[string]string{"tier": "gw"}},
		{UID: "3", Namespace: "a", Name: "plain"},
	}
	in := SortOptIns(spec, pods)
	if got := in.Quota; len(got) != 2 || got[0].Name != "annotated" || got[1].Name != "labelled" || !got[1].OptedIn || !got[1].Isolated {
		t.Fatalf("SortOptIns quota = %+v", got)
	}
	if len(in.Isolated) != 2 || len(in.Refused) != 0 {
		t.Fatalf("SortOptIns isolated = %+v, refused = %+v", in.Isolated, in.Refused)
	}
	st := Render(root, sysctl.Layout{}, spec, pods, nil)
	var kinds []string
	for _, k := range st.Knobs {
		kind, _, _ := strings.Cut(k.ID, "/")
		if len(kinds) == 0 || kinds[len(kinds)-1] != kind {
			kinds = append(kinds, kind)
		}
	}
	if strings.Join(kinds, ",") != "scheduler,cpuset,irq" {
		t.Fatalf("knob kinds in order = %v, want scheduler,cpuset,irq", kinds)
	}
	// The opted-in pods have no cgroups here: reported, not knobs.
	quota := 0
	for _, r := range st.Results {
		if strings.HasPrefix(r.Setting, "cpuquota/") || strings.HasPrefix(r.Setting, "cpuset/pod/") {
			quota++
		}
	}
	if quota == 0 {
		t.Errorf("no results for opted-in pods without cgroups: %+v", st.Results)
	}
}

func TestRenderIRQUnchanged(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/irq/24/smp_affinity_list": "0-1"})
	res := "0"
	st := Render(root, sysctl.Layout{}, v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Reserved: &res},
		IRQ: &v1alpha1.IRQSpec{Affinity: v1alpha1.IRQAffinityUnchanged}}, nil, nil)
	for _, k := range st.Knobs {
		if strings.HasPrefix(k.ID, "irq/") {
			t.Fatalf("Unchanged affinity produced %s", k.ID)
		}
	}
}

// SortOptIns: only the profile's namespace selectors grant; what the pod or
// the caller says is never enough.
func TestSortOptInsGrants(t *testing.T) {
	ann := map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}
	res, iso := "0", "1"
	all := &v1alpha1.NamespaceSelector{}
	pods := []podcgroup.Pod{
		{UID: "1", Namespace: "a", Name: "asks", Annotations: ann},
		// Pre-marked by a caller but not asking: the flags are not trusted.
		{UID: "2", Namespace: "a", Name: "premarked", OptedIn: true, Isolated: true},
	}
	tests := []struct {
		name                     string
		spec                     v1alpha1.TuningSpec
		quota, isolated, refused int
		refusedMessage           string
	}{
		{"no quota, no isolated CPUs", v1alpha1.TuningSpec{}, 0, 0, 0, ""},
		{"Keep grants and refuses nothing", v1alpha1.TuningSpec{CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaKeep}}, 0, 0, 0, ""},
		{"Remove with {} grants every namespace", v1alpha1.TuningSpec{CPUQuota: &v1alpha1.CPUQuotaSpec{NamespaceSelector: all}}, 1, 0, 0, ""},
		{"Remove without a selector fails closed", v1alpha1.TuningSpec{CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove}},
			0, 0, 1, "the profile sets no cpuQuota.namespaceSelector"},
		{"isolated CPUs without a selector fail closed", v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Reserved: &res, Isolated: &iso}},
			0, 0, 1, "the profile sets no cpus.namespaceSelector"},
		{"isolated CPUs granted, quota kept", v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Reserved: &res, Isolated: &iso, NamespaceSelector: all},
			CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaKeep}}, 0, 1, 0, ""},
	}
	for _, tt := range tests {
		in := SortOptIns(tt.spec, pods)
		if len(in.All) != len(pods) {
			t.Errorf("%s: All has %d pods, want every one of %d", tt.name, len(in.All), len(pods))
		}
		if len(in.Quota) != tt.quota || len(in.Isolated) != tt.isolated || len(in.Refused) != tt.refused {
			t.Errorf("%s: quota %d, isolated %d, refused %d; want %d, %d, %d", tt.name,
				len(in.Quota), len(in.Isolated), len(in.Refused), tt.quota, tt.isolated, tt.refused)
			continue
		}
		for _, p := range append(in.Quota, in.Isolated...) {
			if p.Name != "asks" {
				t.Errorf("%s: %s granted without asking", tt.name, p.Name)
			}
		}
		if tt.refused > 0 && !strings.Contains(in.Refused[0].Result.Message, tt.refusedMessage) {
			t.Errorf("%s: message %q lacks %q", tt.name, in.Refused[0].Result.Message, tt.refusedMessage)
		}
	}
}

// Burst grants by the same rules as Remove, but renders bursts, never a
// removal: the pod keeps its quota. A refused pod is reported under the
// burst's setting ID.
func TestRenderBurst(t *testing.T) {
	podDir := "sys/fs/cgroup/cpu/kubepods/burstable/pod1"
	root := testroot.New(t, map[string]string{
		podDir + "/cpu.cfs_quota_us": "200000",
		podDir + "/cpu.cfs_burst_us": "0",
	})
	pct := int32(25)
	spec := v1alpha1.TuningSpec{CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaBurst, BurstPercent: &pct,
		NamespaceSelector: &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{"tier": "latency"}}}}
	ann := map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}
	pods := []podcgroup.Pod{
		{UID: "1", Namespace: "gw", Name: "granted", Annotations: ann, NamespaceLabels: map[string]string{"tier": "latency"}},
		{UID: "2", Namespace: "web", Name: "refused", Annotations: ann},
	}
	in := SortOptIns(spec, pods)
	if len(in.Quota) != 1 || !in.Quota[0].Burst || !in.Quota[0].OptedIn {
		t.Fatalf("granted = %+v; want the one pod, marked Burst", in.Quota)
	}
	if len(in.Refused) != 1 || !strings.HasPrefix(in.Refused[0].Result.Setting, "cpuburst/web/refused/") ||
		!strings.Contains(in.Refused[0].Result.Message, "a CFS burst") {
		t.Fatalf("refused = %+v", in.Refused)
	}
	st := Render(root, sysctl.Layout{}, spec, pods, nil)
	if len(st.Knobs) != 1 || st.Knobs[0].ID != "cpuburst/gw/granted/1" || st.Knobs[0].Desired != "50000" {
		t.Fatalf("knobs = %+v; want one burst of 25%% of 200000", st.Knobs)
	}
}
