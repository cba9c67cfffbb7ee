//go:build privileged

package cpuquota

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cgstat"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
)

// realPod is a burstable cgroupfs-driver pod with one container in the real
// v1 cpu hierarchy under kubepods; remove deletes it as kubelet does.
type realPod struct {
	pod      podcgroup.Pod
	dir, ctr string
}

func (p realPod) quotas(t *testing.T) (pod, ctr string) {
	return testroot.Read(t, filepath.Join(p.dir, cgstat.QuotaFileV1)), testroot.Read(t, filepath.Join(p.ctr, cgstat.QuotaFileV1))
}

func (p realPod) remove(t *testing.T) {
	t.Helper()
	for _, d := range []string{p.ctr, p.dir} {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// newRealPod makes pod name in namespace "shop" under burstable (a cgroup
// made by the test) with the given pod and container quotas.
func newRealPod(t *testing.T, burstable, name, podQuota, ctrQuota string) realPod {
	t.Helper()
	uid := cgtest.RandHex(t, 4) + "-0000-4000-8000-" + cgtest.RandHex(t, 6)
	p := realPod{pod: podcgroup.Pod{UID: uid, Namespace: "shop", Name: name, OptedIn: true},
		dir: filepath.Join(burstable, "pod"+uid)}
	p.ctr = filepath.Join(p.dir, cgtest.RandHex(t, 32))
	for _, d := range []string{p.dir, p.ctr} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { p.remove(t) })
	cgtest.Set(t, filepath.Join(p.dir, cgstat.QuotaFileV1), podQuota)
	cgtest.Set(t, filepath.Join(p.ctr, cgstat.QuotaFileV1), ctrQuota)
	return p
}

// kubepods makes a unique kubepods/burstable tree in the real v1 cpu
// hierarchy and returns its name and the burstable dir.
func kubepods(t *testing.T) (string, string) {
	t.Helper()
	base := cgtest.V1Controller(t, "cpu")
	name := "lttest-" + cgtest.RandHex(t, 4)
	cgtest.Mkdir(t, filepath.Join(base, name))
	burstable := filepath.Join(base, name, "burstable")
	cgtest.Mkdir(t, burstable)
	return name, burstable
}

func pass(t *testing.T, e *apply.Engine, kp string, pods ...podcgroup.Pod) []knob.Knob {
	t.Helper()
	knobs, results, err := Knobs(e.Root, pods, podcgroup.WithKubepods(kp))
	if err != nil || len(results) != 0 {
		t.Fatalf("Knobs: %v %v", results, err)
	}
	if _, err := e.Apply(apply.Meta{Profile: "p"}, knobs); err != nil {
		t.Fatal(err)
	}
	return knobs
}

// TestRealRecreatedPodRevert: a StatefulSet pod shop/web-0 (uid1) is tuned,
// deleted and recreated under the same name (uid2, a fresh quota) between
// two passes; revert must restore uid2's own quota. Keyed by name, uid2's
// knob found uid1's journal entry (uid1's path and original) and revert
// left uid2 unlimited.
func TestRealRecreatedPodRevert(t *testing.T) {
	kp, burstable := kubepods(t)
	root := testroot.RealKernel(t)
	e := &apply.Engine{Root: root, Log: logr.Discard()}

	a := newRealPod(t, burstable, "web-0", "20000", "10000")
	pass(t, e, kp, a.pod)
	if p, c := a.quotas(t); p != cgstat.UnlimitedV1 || c != cgstat.UnlimitedV1 {
		t.Fatalf("uid1 after apply: pod %s, container %s; want -1", p, c)
	}
	a.remove(t)

	b := newRealPod(t, burstable, "web-0", "30000", "15000")
	pass(t, e, kp, b.pod)
	if p, c := b.quotas(t); p != cgstat.UnlimitedV1 || c != cgstat.UnlimitedV1 {
		t.Fatalf("uid2 after apply: pod %s, container %s; want -1", p, c)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if p, c := b.quotas(t); p != "30000" || c != "15000" {
		t.Fatalf("uid2 after revert: pod %s, container %s; want its own 30000, 15000", p, c)
	}
}

// TestRealUpgradeFromNameKeyedJournal: a journal written by the previous
// version keys the pod by namespace/name. The new version re-keys it by
// restoring the old entries (no knob names them) and journaling the
// originals again under the UID, so the quota is removed and a later revert
// restores the true originals.
func TestRealUpgradeFromNameKeyedJournal(t *testing.T) {
	kp, burstable := kubepods(t)
	root := testroot.RealKernel(t)
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	p := newRealPod(t, burstable, "web-0", "20000", "10000")

	// What the previous version wrote: the same knobs under name-keyed IDs.
	knobs, _, err := Knobs(root, []podcgroup.Pod{p.pod}, podcgroup.WithKubepods(kp))
	if err != nil {
		t.Fatal(err)
	}
	for i := range knobs {
		knobs[i].ID = strings.Replace(knobs[i].ID, "/"+p.pod.UID, "", 1)
	}
	if _, err := e.Apply(apply.Meta{Profile: "p"}, knobs); err != nil {
		t.Fatal(err)
	}

	pass(t, e, kp, p.pod)
	if pq, cq := p.quotas(t); pq != cgstat.UnlimitedV1 || cq != cgstat.UnlimitedV1 {
		t.Fatalf("after the upgraded pass: pod %s, container %s; want -1", pq, cq)
	}
	j, err := journal.Load(root)
	if err != nil || j == nil {
		t.Fatalf("journal: %v", err)
	}
	for _, en := range j.Entries {
		if !strings.Contains(en.ID, p.pod.UID) {
			t.Errorf("name-keyed entry %s left in the journal", en.ID)
		}
	}
	if en := j.Find(PodID(p.pod)); en == nil || en.Original != "20000" {
		t.Fatalf("entry %s = %+v; want original 20000", PodID(p.pod), en)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if pq, cq := p.quotas(t); pq != "20000" || cq != "10000" {
		t.Fatalf("after revert: pod %s, container %s; want 20000, 10000", pq, cq)
	}
}
