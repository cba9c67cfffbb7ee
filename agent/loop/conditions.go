package loop

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/journal"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

func setCondition(st *v1alpha1.LatencyNodeStatus, c metav1.Condition, gen int64, now metav1.Time) {
	c.ObservedGeneration = gen
	c.LastTransitionTime = now
	c.Message = bound.String(c.Message, bound.ConditionMessage)
	meta.SetStatusCondition(&st.Conditions, c)
}

// appliedCondition is computed from every setting, before the list is cut
// to the CRD's limit (a summarised IRQ line counts its IRQs); omitted says
// how many the list leaves out.
func appliedCondition(err error, settings []v1alpha1.SettingResult, omitted int32) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.NodeApplied}
	switch {
	case errors.Is(err, journal.ErrCorrupt):
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonJournalCorrupt
		c.Message = fmt.Sprintf("nothing applied: %v; the agent could not move it aside: fix that and it recovers (see the README; do not delete the journal)", err)
		return c
	case err != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonApplyFailed, err.Error()
		return c
	}
	counts := map[v1alpha1.SettingState]int{}
	var bad, fellBack []string
	for _, s := range settings {
		counts[s.State] += weight(s)
		switch s.State {
		case v1alpha1.SettingFailed, v1alpha1.SettingInvalid:
			bad = append(bad, fmt.Sprintf("%s (%s)", s.Setting, s.State))
		case v1alpha1.SettingFallback:
			// The kernel ejected our scheduler: the node runs the fair
			// class, not its spec. Its own reason, which a rollout fails
			// the node on even beside Invalid settings (those alone do not).
			fellBack = append(fellBack, fmt.Sprintf("%s: %s", s.Setting, s.Message))
			bad = append(bad, fmt.Sprintf("%s (%s)", s.Setting, s.State))
		}
	}
	summary := fmt.Sprintf("%d applied, %d unsupported, %d immovable", counts[v1alpha1.SettingApplied],
		counts[v1alpha1.SettingUnsupported], counts[v1alpha1.SettingImmovable])
	if n := counts[v1alpha1.SettingOwnedBy]; n > 0 {
		summary += fmt.Sprintf(", %d owned by another writer (left to it)", n)
	}
	if omitted > 0 {
		summary += fmt.Sprintf(" (%d not listed in settings: see settingsOmitted)", omitted)
	}
	if len(fellBack) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonSchedulerFallback
		c.Message = fmt.Sprintf("the kernel ejected the scheduler, the node fell back to the fair class (%s); %s; not applied: %s",
			strings.Join(fellBack, "; "), summary, strings.Join(first(bad, 8), ", "))
		return c
	}
	if len(bad) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonPartiallyApplied
		c.Message = fmt.Sprintf("%s; not applied: %s", summary, strings.Join(first(bad, 8), ", "))
		return c
	}
	c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonApplied, summary
	return c
}

// driftCondition says which settings someone else changed. Its message holds
// no time or count, so a drift repeated every pass (irqbalance) writes the
// status once, not on every pass; the condition's lastTransitionTime says
// since when.
func driftCondition(drifts []apply.Drift, irqbalancePID int) metav1.Condition {
	node, pods := splitPodDrifts(drifts)
	if len(node) == 0 && len(pods) > 0 {
		return metav1.Condition{Type: v1alpha1.NodeDrifted, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonPodSettingsReasserted, Message: "every node setting held; re-asserted pod settings their owners or kubelet changed: " +
				strings.Join(first(pods, 8), ", ")}
	}
	drifts = node
	if len(drifts) == 0 {
		return metav1.Condition{Type: v1alpha1.NodeDrifted, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonNoDrift, Message: "every setting held since the last pass"}
	}
	var parts []string
	for _, d := range drifts {
		parts = append(parts, fmt.Sprintf("%s was %q, ours %q (likely %s)", d.ID, d.Theirs, d.Ours, culprit(d.ID, irqbalancePID)))
	}
	slices.Sort(parts)
	return metav1.Condition{Type: v1alpha1.NodeDrifted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonDriftDetected,
		Message: "re-asserted after someone else changed: " + strings.Join(first(parts, 8), "; ")}
}

// splitPodDrifts separates drifts of node settings from those of pod
// settings (their IDs, sorted, so the message is stable).
func splitPodDrifts(drifts []apply.Drift) (node []apply.Drift, pods []string) {
	for _, d := range drifts {
		// Pod-scoped settings are what their owner controls (its threads'
		// policy) or kubelet rewrites for it (quota and cpuset on an
		// in-place resize).
		if _, ok := settingid.PodScope(d.ID); ok {
			pods = append(pods, d.ID)
			continue
		}
		node = append(node, d)
	}
	slices.Sort(pods)
	return node, pods
}

// culprit names who most likely changed a setting, by its kind
// (settingid's Culprit column), irqbalance by its pid when it runs.
func culprit(id string, irqbalancePID int) string {
	if settingid.IRQ.Has(id) && irqbalancePID != 0 {
		return fmt.Sprintf("irqbalance, pid %d", irqbalancePID)
	}
	return settingid.Culprit(id)
}

func rebootCondition(cpus *v1alpha1.CPUSpec, cmdline []string) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.NodeRebootRequired, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonCmdlineMatches}
	if cpus == nil || cpus.Isolated == nil {
		c.Message = "the profile isolates no CPUs"
		return c
	}
	isolated, err := cpulist.Parse(*cpus.Isolated)
	if err != nil {
		c.Message = fmt.Sprintf("cpus.isolated %q is not a cpulist", *cpus.Isolated)
		return c
	}
	missing := facts.MissingIsolation(isolated, cmdline)
	if len(missing) == 0 {
		c.Message = "the kernel command line isolates " + isolated.String()
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonCmdlineMissingFlags
	c.Message = "add to the kernel command line and reboot: " + strings.Join(missing, " ")
	return c
}

func revertedCondition(err error, rep apply.Report) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.NodeReverted}
	if errors.Is(err, journal.ErrCorrupt) {
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonJournalCorrupt
		c.Message = fmt.Sprintf("nothing reverted: %v; inspect it by hand", err)
		return c
	}
	if err != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonReverting, err.Error()
		return c
	}
	var failed, conflicts []string
	for _, r := range rep.Results {
		switch r.State {
		case v1alpha1.SettingFailed:
			failed = append(failed, r.Setting)
		case v1alpha1.SettingConflict:
			conflicts = append(conflicts, conflictNote(r))
		}
	}
	switch {
	case len(failed) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonReverting
		c.Message = "restore failed, retrying: " + strings.Join(first(failed, 8), ", ")
	case len(conflicts) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonRevertConflict
		c.Message = "reverted; left in place (see settings): " + strings.Join(first(conflicts, 8), ", ")
	default:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonRevertComplete
		c.Message = fmt.Sprintf("%d setting(s) restored to their originals", rep.Written)
	}
	return c
}

// conflictNote names a setting a revert left in place: changed by someone
// else (their value), or given up after failed restores (no value read).
func conflictNote(r v1alpha1.SettingResult) string {
	if r.Actual == "" {
		return fmt.Sprintf("%s (could not restore %q)", r.Setting, r.Desired)
	}
	return fmt.Sprintf("%s (theirs %q)", r.Setting, r.Actual)
}
