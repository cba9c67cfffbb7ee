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
		CPUs:      &v1alpha1.CPUSpec{Reserved: &res, Isolated: &iso},
		IRQ:       &v1alpha1.IRQSpec{Affinity: v1alpha1.IRQAffinityReserved},
		CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove,
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gw"}}},
	}
	pods := []podcgroup.Pod{
		{UID: "1", Namespace: "a", Name: "annotated", Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}},
		{UID: "2", Namespace: "a", Name: "labelled", Labels: map[string]string{"tier": "gw"}},
		{UID: "3", Namespace: "a", Name: "plain"},
	}
	if got := OptedIn(spec, pods); len(got) != 2 || got[0].Name != "annotated" || got[1].Name != "labelled" || !got[1].OptedIn {
		t.Fatalf("OptedIn = %+v", got)
	}
	st := Render(root, sysctl.Layout{}, spec, pods)
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
		IRQ: &v1alpha1.IRQSpec{Affinity: v1alpha1.IRQAffinityUnchanged}}, nil)
	for _, k := range st.Knobs {
		if strings.HasPrefix(k.ID, "irq/") {
			t.Fatalf("Unchanged affinity produced %s", k.ID)
		}
	}
}
