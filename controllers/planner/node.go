package planner

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// What a Node and its LatencyNode say about the node's tuning in its
// running boot: the facts the reboot decisions and the tuning-pending
// taint (controllers/taint.go) are both taken from.

// ReadyStatus is the status of n's Ready condition, "" when it reports none.
func ReadyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// NotReady: the node reports a Ready condition that is not True (False or
// Unknown); a node reporting none yet is judged by its agent alone.
func NotReady(n *corev1.Node) bool {
	st := ReadyStatus(n)
	return st != "" && st != corev1.ConditionTrue
}

// AppliedThisBoot: the agent applied all it could (its Applied is True,
// or False only for settings the kernel refused as Invalid: see
// RefusedInvalid) and (when the kubelet reports a boot id) reported it in
// the node's running boot: after a reboot the Applied of the previous boot
// does not count until the agent reports again with the new boot's id.
func AppliedThisBoot(n *corev1.Node, ln *v1alpha1.LatencyNode) bool {
	c := meta.FindStatusCondition(ln.Status.Conditions, v1alpha1.NodeApplied)
	if c == nil || (c.Status != metav1.ConditionTrue && len(RefusedInvalid(ln)) == 0) {
		return false
	}
	boot := n.Status.NodeInfo.BootID
	return boot == "" || (ln.Status.Boot != nil && ln.Status.Boot.BootID == boot)
}

// RefusedInvalid names the settings the kernel refused as Invalid when
// they alone keep the agent's Applied False (reason PartiallyApplied, no
// setting Failed): a bad value degrades its own setting, not the node, so
// the tuning-pending taint and the reboot verification count the node
// tuned (issue 40). The profile still says Degraded with the agent's
// message. nil when Applied is True or False for any other cause, or when
// the agent's bounded list could hide a Failed setting (the list puts
// Failed, Invalid and Conflict first: when it is all of those and some
// settings were left out, the rest is unknown).
func RefusedInvalid(ln *v1alpha1.LatencyNode) []string {
	c := meta.FindStatusCondition(ln.Status.Conditions, v1alpha1.NodeApplied)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonPartiallyApplied {
		return nil
	}
	var invalid []string
	act := 0 // settings a person must act on, listed first
	for _, s := range ln.Status.Settings {
		switch s.State {
		case v1alpha1.SettingFailed, v1alpha1.SettingFallback:
			// Fallback: the kernel ejected our scheduler; the node runs
			// the fair class, not its spec.
			return nil
		case v1alpha1.SettingInvalid:
			invalid = append(invalid, s.Setting)
			act++
		case v1alpha1.SettingConflict:
			act++
		}
	}
	if ln.Status.SettingsOmitted > 0 && act == len(ln.Status.Settings) {
		return nil
	}
	return invalid
}

// TunedThisBoot: Applied for the LatencyNode's current generation in the
// node's running boot.
func TunedThisBoot(n *corev1.Node, ln *v1alpha1.LatencyNode) bool {
	return ln.Status.ObservedGeneration >= ln.Generation && AppliedThisBoot(n, ln)
}

// RevertDone reports whether the agent carried out the current Revert spec:
// condition Reverted is True and was observed for this generation.
func RevertDone(ln *v1alpha1.LatencyNode) bool {
	if ln.Spec.Action != v1alpha1.ActionRevert {
		return false
	}
	c := meta.FindStatusCondition(ln.Status.Conditions, v1alpha1.NodeReverted)
	if c == nil || c.Status != metav1.ConditionTrue {
		return false
	}
	return c.ObservedGeneration >= ln.Generation || ln.Status.ObservedGeneration >= ln.Generation
}

// notReadyFor returns how long the node's Ready condition has not been True
// (False or Unknown), and false when the node is Ready or reports no Ready
// condition at all (nothing is known against it).
func notReadyFor(node *corev1.Node, now time.Time) (time.Duration, bool) {
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return 0, false
		}
		return now.Sub(c.LastTransitionTime.Time), true
	}
	return 0, false
}

// Unreachable reports whether the node has been NotReady longer than
// timeout, and if not yet, how long until it will be (0 when it is Ready).
func Unreachable(node *corev1.Node, now time.Time, timeout time.Duration) (bool, time.Duration) {
	d, notReady := notReadyFor(node, now)
	if !notReady {
		return false, 0
	}
	if d >= timeout {
		return true, 0
	}
	return false, timeout - d
}
