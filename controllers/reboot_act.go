package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/controllers/rollout"
)

// Managed reboots, one node's act (rebootAct, decided by planner/reboot.go)
// carried out: the LatencyNode's spec.reboot written before the act it records, so a
// restarted manager resumes from what was done.

// carryOut does one node's act: the record first where the act advances
// it, so a restart resumes from what was done.
func (r *rebooter) carryOut(ctx context.Context, p *v1alpha1.LatencyProfile, ln *v1alpha1.LatencyNode, n *corev1.Node,
	a rebootAct, why string, now time.Time) error {
	log := ctrl.LoggerFrom(ctx).WithValues("node", ln.Name)
	since := metav1.NewTime(now.Truncate(time.Second))
	switch a {
	case rebootStart:
		return r.start(ctx, p, ln, n, since)
	case rebootDrain:
		if n != nil && (!n.Spec.Unschedulable || n.Annotations[v1alpha1.RebootCordonAnnotation] != ln.Spec.Reboot.Revision) {
			return r.exec().Cordon(ctx, n, ln.Spec.Reboot.Revision)
		}
	case rebootRequest:
		rec := ln.Spec.Reboot.DeepCopy()
		rec.Phase, rec.Since, rec.BootID = v1alpha1.RebootRequested, since, bootIDOf(n, ln)
		if err := r.writeRecord(ctx, ln, rec, nil); err != nil {
			return err
		}
		log.Info("Asked the agent to reboot the node", "bootID", rec.BootID)
		r.event(p, corev1.EventTypeNormal, eventRebootRequested, "Drained node %s; its agent reboots it for %s", ln.Name, rec.Revision)
	case rebootWithdraw:
		rec := ln.Spec.Reboot.DeepCopy()
		rec.Phase, rec.Since = v1alpha1.RebootDraining, since
		if err := r.writeRecord(ctx, ln, rec, nil); err != nil {
			return err
		}
		log.Info("Took the reboot request back; the node stays cordoned until it can no longer reboot for it",
			"revision", rec.Revision, "bootID", rec.BootID, "why", why)
		r.event(p, corev1.EventTypeNormal, eventRebootWithdrawn, "Took back the reboot of node %s for %s (%s); it stays cordoned until it can no longer reboot for it",
			ln.Name, rec.Revision, why)
	case rebootVerify:
		return r.verify(ctx, p, ln, why, since, now)
	case rebootFinish, rebootAbandon:
		if _, err := r.exec().Uncordon(ctx, n); err != nil {
			return err
		}
		if err := r.writeRecord(ctx, ln, nil, nil); err != nil {
			return err
		}
		r.markStarted(ln.Name, false)
		if a == rebootAbandon {
			log.Info("Paused the reboots", "why", why)
			r.event(p, corev1.EventTypeWarning, eventRebootPaused, "%s; the reboots of %s paused", why, p.Name)
			return nil
		}
		log.Info("Uncordoned the node after its reboot", "why", why)
		r.event(p, corev1.EventTypeNormal, eventRebootDone, "Uncordoned node %s: %s", ln.Name, why)
	case rebootStall:
		if p.Status.Reboots == nil || !p.Status.Reboots.Paused || p.Status.Reboots.Message != why {
			log.Info("Paused the reboots", "why", why)
			r.event(p, corev1.EventTypeWarning, eventRebootPaused, "%s; the reboots of %s paused", why, p.Name)
		}
	}
	return nil
}

// start records ln's reboot Draining, then cordons its node: a reboot of
// the revision ln holds, or a reboot back from p's target.
func (r *rebooter) start(ctx context.Context, p *v1alpha1.LatencyProfile, ln *v1alpha1.LatencyNode, n *corev1.Node, since metav1.Time) error {
	r.markStarted(ln.Name, true)
	rec := &v1alpha1.NodeRebootSpec{Revision: ln.Spec.Revision, Phase: v1alpha1.RebootDraining, Since: since}
	if !stagedForReboot(ln) {
		rec.Revision = backRevision(currentRevision(p))
	}
	if err := r.writeRecord(ctx, ln, rec, nil); err != nil {
		r.markStarted(ln.Name, false)
		return err
	}
	if err := r.exec().Cordon(ctx, n, rec.Revision); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Cordoned the node to reboot it", "node", ln.Name, "revision", rec.Revision)
	r.event(p, corev1.EventTypeNormal, eventRebootDraining, "Cordoned node %s and draining it to reboot for %s", ln.Name, rec.Revision)
	return nil
}

// verify records ln's reboot Verifying and, save for a reboot back (judged
// by the boot, not the rollout's window), restarts the verification clock.
func (r *rebooter) verify(ctx context.Context, p *v1alpha1.LatencyProfile, ln *v1alpha1.LatencyNode, why string, since metav1.Time, now time.Time) error {
	rec := ln.Spec.Reboot.DeepCopy()
	rec.Phase, rec.Since = v1alpha1.RebootVerifying, since
	var stamp *verifyStamp
	if !isBack(rec) {
		stamp = &verifyStamp{at: now}
		if ro := p.Spec.Rollout; ro != nil {
			stamp.after = &metav1.Time{Time: since.Add(rollout.Window(ro))}
		}
	}
	if err := r.writeRecord(ctx, ln, rec, stamp); err != nil {
		return err
	}
	r.event(p, corev1.EventTypeNormal, eventRebootVerifying, "Node %s is %s; verifying", ln.Name, why)
	return nil
}

func (r *rebooter) event(p *v1alpha1.LatencyProfile, typ, reason, format string, args ...any) {
	r.Recorder.Eventf(p, nil, typ, reason, eventActionReboot, format, args...)
}

// bootIDOf is the node's running boot as the agent reports it, else as
// the kubelet does.
func bootIDOf(n *corev1.Node, ln *v1alpha1.LatencyNode) string {
	if b := ln.Status.Boot; b != nil && b.BootID != "" {
		return b.BootID
	}
	if n != nil {
		return n.Status.NodeInfo.BootID
	}
	return ""
}

// verifyStamp restarts the rollout's verification clock at the boot: the
// revision-set-at annotation and spec.verifyAfter.
type verifyStamp struct {
	at    time.Time
	after *metav1.Time
}

// writeRecord sets (rec) or clears (nil) ln's spec.reboot, through the
// LatencyNode spec's one writer (executor.WriteLatencyNodeSpec), which tests the
// generation it was read at: a spec written since (a rollout move) makes
// it a StaleError, and the pass runs again.
func (r *rebooter) writeRecord(ctx context.Context, ln *v1alpha1.LatencyNode, rec *v1alpha1.NodeRebootSpec, stamp *verifyStamp) error {
	if rec == nil && ln.Spec.Reboot == nil {
		return nil
	}
	w := executor.SpecWrite{Spec: *ln.Spec.DeepCopy(), Record: true}
	w.Spec.Reboot = rec
	if stamp != nil {
		w.Stamp = stamp.at
		if stamp.after != nil {
			w.Spec.VerifyAfter = stamp.after
		}
	}
	if _, err := r.exec().WriteLatencyNodeSpec(ctx, ln, w); err != nil {
		return fmt.Errorf("recording the reboot of %s: %w", ln.Name, err)
	}
	return nil
}
