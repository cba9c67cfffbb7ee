package desired_test

import (
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

const (
	uid    = "1b4f0c5e-9d7a-4b1e-8f00-0123456789ab"
	podRel = "sys/fs/cgroup/kubepods/burstable/pod" + uid
)

func partialRoot(t *testing.T) *host.Root {
	return testroot.New(t, map[string]string{
		"proc/irq/default_smp_affinity":        "3\n",
		"proc/irq/24/smp_affinity_list":        "0-1\n",
		"proc/irq/41/smp_affinity_list":        "0-1\n",
		"sys/fs/cgroup/cgroup.controllers":     "cpuset cpu\n",
		"sys/fs/cgroup/cgroup.subtree_control": "cpuset cpu\n",
		podRel + "/cpu.max":                    "150000 100000\n",
	})
}

func partialSpec() v1alpha1.TuningSpec {
	res := "0"
	return v1alpha1.TuningSpec{
		CPUs:     &v1alpha1.CPUSpec{Reserved: &res},
		IRQ:      &v1alpha1.IRQSpec{Affinity: v1alpha1.IRQAffinityReserved},
		CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove, NamespaceSelector: &v1alpha1.NamespaceSelector{}},
	}
}

var gw = podcgroup.Pod{UID: uid, Namespace: "shop", Name: "gw",
	Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}}

func pass(t *testing.T, e *apply.Engine, pods []podcgroup.Pod) (desired.State, apply.Report) {
	t.Helper()
	ds := desired.Render(e.Root, sysctl.Layout{}, partialSpec(), pods, nil)
	rep, err := e.Apply(apply.Meta{Profile: "p", Undetermined: ds.Undetermined}, ds.Knobs)
	if err != nil {
		t.Fatal(err)
	}
	return ds, rep
}

func journaled(t *testing.T, root *host.Root) map[string]bool {
	t.Helper()
	j, err := journal.Load(root)
	if err != nil || j == nil {
		t.Fatalf("journal: %v %v", j, err)
	}
	out := map[string]bool{}
	for _, en := range j.Entries {
		out[en.ID] = true
	}
	return out
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

// A pass that cannot list /proc/irq or find a pod's cgroup (the pod still in
// the API) leaves those settings as applied instead of restoring them, says
// so, and the next full pass finds them still ours: no flapping.
func TestUndeterminedSettingsAreLeftAsApplied(t *testing.T) {
	root := partialRoot(t)
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	if _, rep := pass(t, e, []podcgroup.Pod{gw}); rep.Written != 4 {
		t.Fatalf("first pass wrote %d, want 4 (default mask, 2 IRQs, pod quota): %+v", rep.Written, rep.Results)
	}
	want := []string{"irq/default_smp_affinity", "irq/24", "irq/41", "cpuquota/shop/gw/" + uid}
	for _, id := range want {
		if !journaled(t, root)[id] {
			t.Fatalf("%s not journaled after the first pass", id)
		}
	}

	// Second pass: /proc/irq is a file (listing fails), the pod's cgroup is
	// briefly elsewhere while the pod stays in the API.
	rename(t, root.Proc("irq"), root.Proc("irq.moved"))
	testroot.Write(t, root.Proc("irq"), "not a directory")
	rename(t, root.Path(podRel), root.Path(podRel+".moved"))
	ds, rep := pass(t, e, []podcgroup.Pod{gw})
	if rep.Written != 0 || len(rep.Restored) != 0 {
		t.Fatalf("undetermined pass wrote %d and restored %+v; want nothing", rep.Written, rep.Restored)
	}
	if len(ds.Undetermined) == 0 {
		t.Fatalf("render reported nothing undetermined: %+v", ds.Results)
	}
	j := journaled(t, root)
	for _, id := range want {
		if !j[id] {
			t.Errorf("%s dropped from the journal on an undetermined pass", id)
		}
	}
	for _, id := range want {
		r := find(rep.Held, id)
		if r == nil || r.State != v1alpha1.SettingFailed || !strings.Contains(r.Message, "left as applied") {
			t.Errorf("held result for %s = %+v; want Failed, left as applied", id, r)
		}
	}
	os.Remove(root.Proc("irq"))
	rename(t, root.Proc("irq.moved"), root.Proc("irq"))
	for _, rel := range []string{"proc/irq/24/smp_affinity_list", "proc/irq/default_smp_affinity", podRel + ".moved/cpu.max"} {
		if got := testroot.Read(t, root.Path(rel)); got == "0-1" || got == "3" || strings.HasPrefix(got, "150000") {
			t.Errorf("%s = %q: restored on an undetermined pass", rel, got)
		}
	}

	// Third pass: everything is back and still holds our values.
	rename(t, root.Path(podRel+".moved"), root.Path(podRel))
	if _, rep := pass(t, e, []podcgroup.Pod{gw}); rep.Written != 0 || len(rep.Restored) != 0 || len(rep.Held) != 0 {
		t.Fatalf("full pass after an undetermined one: wrote %d, restored %+v, held %+v; want nothing", rep.Written, rep.Restored, rep.Held)
	}

	// The pod is deleted from the API: its quota is restored as before.
	_, rep = pass(t, e, nil)
	if r := find(rep.Restored, "cpuquota/shop/gw/"+uid); r == nil || r.State != v1alpha1.SettingReverted {
		t.Fatalf("deleted pod's quota: %+v", rep.Restored)
	}
	if got := testroot.Read(t, root.Path(podRel+"/cpu.max")); got != "150000 100000" {
		t.Fatalf("deleted pod's cpu.max = %q, want the original 150000 100000", got)
	}
}

func find(rs []v1alpha1.SettingResult, id string) *v1alpha1.SettingResult {
	for i := range rs {
		if rs[i].Setting == id {
			return &rs[i]
		}
	}
	return nil
}
