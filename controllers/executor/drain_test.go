package executor

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// TestDrainFollowsKubectlDrain: only DaemonSet, mirror and finished pods
// stay; a toleration exempts nothing (issue 40: a wildcard toleration kept
// a pod's PodDisruptionBudget from ever being asked); bare and emptyDir
// pods block unless spec.reboot.drain accepts them.
func TestDrainFollowsKubectlDrain(t *testing.T) {
	ds := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u", Controller: new(bool)}
	*ds.Controller = true
	rs := ds
	rs.Kind = "ReplicaSet"
	notController := rs
	notController.Controller = nil
	pod := func(f func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: []metav1.OwnerReference{rs}}}
		f(p)
		return p
	}
	emptyDir := func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	bare := func(p *corev1.Pod) { p.OwnerReferences = nil }
	none, force, emptyOK := v1alpha1.DrainSpec{}, v1alpha1.DrainSpec{Force: true}, v1alpha1.DrainSpec{DeleteEmptyDirData: true}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		opts v1alpha1.DrainSpec
		want drainAction
	}{
		{"ReplicaSet", pod(func(*corev1.Pod) {}), none, drainEvict},
		{"DaemonSet", pod(func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{ds} }), none, drainSkip},
		{"mirror", pod(func(p *corev1.Pod) { p.Annotations = map[string]string{MirrorPodAnnotation: "x"} }), none, drainSkip},
		{"finished", pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), none, drainSkip},
		{"failed, bare", pod(func(p *corev1.Pod) { bare(p); p.Status.Phase = corev1.PodFailed }), none, drainSkip},
		{"tolerates the pending taint", pod(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: v1alpha1.TuningPendingTaint, Operator: corev1.TolerationOpExists}}
		}), none, drainEvict},
		{"tolerates everything", pod(func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), none, drainEvict},
		{"bare", pod(bare), none, drainRefuse},
		{"owned but by no controller", pod(func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{notController} }), none, drainRefuse},
		{"bare, force", pod(bare), force, drainEvict},
		{"emptyDir", pod(emptyDir), none, drainRefuse},
		{"emptyDir, force only", pod(emptyDir), force, drainRefuse},
		{"emptyDir, deleteEmptyDirData", pod(emptyDir), emptyOK, drainEvict},
		{"bare emptyDir, deleteEmptyDirData only", pod(func(p *corev1.Pod) { bare(p); emptyDir(p) }), emptyOK, drainRefuse},
		{"bare, terminating: waited for", pod(func(p *corev1.Pod) {
			bare(p)
			p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
		}), none, drainEvict},
	} {
		got, why := drainAct(tc.pod, tc.opts)
		if got != tc.want {
			t.Errorf("%s: drainAct = %d (%s), want %d", tc.name, got, why, tc.want)
		}
		if got == drainRefuse && !strings.Contains(why, "spec.reboot.drain.") {
			t.Errorf("%s: refused without naming the field that accepts it: %q", tc.name, why)
		}
	}
}
