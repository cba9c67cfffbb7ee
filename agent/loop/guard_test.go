package loop

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func TestCordonedFor(t *testing.T) {
	node := func(unschedulable bool, marker *string) *corev1.Node {
		n := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: unschedulable}}
		if marker != nil {
			n.Annotations = map[string]string{v1alpha1.RebootCordonAnnotation: *marker}
		}
		return n
	}
	for _, tc := range []struct {
		name string
		n    *corev1.Node
		want string // "" or a part of the refusal
	}{
		{"cordoned with the marker for the revision", node(true, ptr.To("gw-1a")), ""},
		{"schedulable", node(false, nil), "for revision gw-1a: the node is schedulable"},
		{"marker without the cordon", node(false, ptr.To("gw-1a")), "the node is schedulable"},
		{"a person's cordon", node(true, nil), "cordoned without the manager's marker latencytier.io/reboot-cordon"},
		{"marker for another revision", node(true, ptr.To("gw-2b")), `names revision "gw-2b"`},
		{"empty marker", node(true, ptr.To("")), `names revision ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cordonedFor(tc.n, "gw-1a")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("cordonedFor = %q, want %q", got, tc.want)
			}
			if got != "" && !strings.HasPrefix(got, "node not cordoned by the manager for revision gw-1a") {
				t.Errorf("refusal %q does not say what was missing first", got)
			}
		})
	}
}

func TestPickSlot(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renewedAgo time.Duration, seconds int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		r := metav1.NewMicroTime(now.Add(-renewedAgo))
		l.Spec.RenewTime = &r
		if seconds > 0 {
			l.Spec.LeaseDurationSeconds = ptr.To(seconds)
		}
		return l
	}
	for _, tc := range []struct {
		name    string
		leases  []*coordinationv1.Lease // nil: no Lease yet
		want    int
		refusal string
	}{
		{"none allowed", nil, -1, "the cluster admin allows 0"},
		{"never taken", []*coordinationv1.Lease{nil}, 0, ""},
		{"held by another", []*coordinationv1.Lease{lease("b", time.Minute, 0)}, -1, "no reboot slot free: 1 of 1 held by b"},
		{"all held", []*coordinationv1.Lease{lease("b", time.Minute, 0), lease("c", 0, 0)}, -1, "2 of 2 held by b, c"},
		{"given back", []*coordinationv1.Lease{lease("", time.Minute, 0)}, 0, ""},
		{"second free", []*coordinationv1.Lease{lease("b", time.Minute, 0), nil}, 1, ""},
		{"already ours, after a free one", []*coordinationv1.Lease{nil, lease("a", time.Minute, 0)}, 1, ""},
		{"expired by its own duration", []*coordinationv1.Lease{lease("b", 2*time.Minute, 60)}, 0, ""},
		{"expired by the default duration", []*coordinationv1.Lease{lease("b", SlotLeaseDuration, 0)}, 0, ""},
		{"not yet expired", []*coordinationv1.Lease{lease("b", SlotLeaseDuration-time.Second, 0)}, -1, "held by b"},
		{"held without a time", []*coordinationv1.Lease{{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("b")}}}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var slots []slot
			for i, l := range tc.leases {
				slots = append(slots, slot{Index: i, Lease: l})
			}
			got, refusal := pickSlot(slots, "a", now)
			if got != tc.want || (tc.refusal == "") != (refusal == "") || !strings.Contains(refusal, tc.refusal) {
				t.Fatalf("pickSlot = %d, %q; want %d, %q", got, refusal, tc.want, tc.refusal)
			}
		})
	}
}

func TestReleaseDue(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	rec := func(slot string, asked time.Duration) *rebootRecord {
		return &rebootRecord{Revision: "gw-1a", FromBoot: "boot-1", RequestedAt: now.Add(-asked), Slot: slot}
	}
	standing := &v1alpha1.NodeRebootSpec{Revision: "gw-1a", Phase: v1alpha1.RebootRequested}
	for _, tc := range []struct {
		name   string
		spec   *v1alpha1.NodeRebootSpec
		rec    *rebootRecord
		bootID string
		want   bool
	}{
		{"no record", standing, nil, "boot-1", false},
		{"no slot held", nil, rec("", time.Hour), "boot-2", false},
		{"booted anew", standing, rec("s-0", time.Minute), "boot-2", true},
		{"in flight", standing, rec("s-0", time.Minute), "boot-1", false},
		{"overdue but still asked", standing, rec("s-0", time.Hour), "boot-1", false},
		{"taken back while in flight", nil, rec("s-0", time.Minute), "boot-1", false},
		{"taken back, no reboot in flight", nil, rec("s-0", DefaultRebootFailAfter), "boot-1", true},
		{"withdrawn to Draining", &v1alpha1.NodeRebootSpec{Revision: "gw-1a", Phase: v1alpha1.RebootDraining}, rec("s-0", time.Hour), "boot-1", true},
		{"asked for another revision", &v1alpha1.NodeRebootSpec{Revision: "gw-2b", Phase: v1alpha1.RebootRequested}, rec("s-0", time.Hour), "boot-1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := releaseDue(tc.spec, tc.rec, tc.bootID, now, DefaultRebootFailAfter); got != tc.want {
				t.Fatalf("releaseDue = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReadRebootSlots(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content string
		want    int
		err     string
	}{
		{"1", 1, ""},
		{" 3\n", 3, ""},
		{"0", 0, ""},
		{"16", 16, ""},
		{"17", 0, "not a number of slots from 0 to 16"},
		{"-1", 0, "not a number"},
		{"two", 0, "not a number"},
		{"", 0, "not a number"},
		{"0x2", 0, "not a number"},
		{"+2", 0, "not a number"},
	} {
		f := filepath.Join(dir, "slots")
		if err := os.WriteFile(f, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := readRebootSlots(f)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("slots %q: %d, %v; want %d, %q", tc.content, got, err, tc.want, tc.err)
		}
	}
	if _, err := readRebootSlots(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "latencytier-reboots") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := readRebootSlots(""); err == nil {
		t.Error("no file configured: no error")
	}
}
