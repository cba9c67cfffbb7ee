package loop

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/internal/bound"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// applyInput is everything one Apply pass tells status.
type applyInput struct {
	Node    *v1alpha1.LatencyNode
	Report  apply.Report
	Err     error
	Results []v1alpha1.SettingResult // settings that became no knob
	Kernel  v1alpha1.KernelFacts
	// IRQBalancePID names the likely culprit of IRQ drift.
	IRQBalancePID int
	// Reasserted counts this pass's writes that only re-asserted drift
	// (Report.Drifts may also hold earlier passes' drifts, held so the
	// condition does not flap): they are no new apply.
	Reasserted int
	Now        metav1.Time
	// Boot is the pass's boot status (boot.go); nil: RebootRequired from
	// the kernel facts alone.
	Boot *v1alpha1.BootStatus
}

// applyStatus is the status after an Apply pass; prev is the current status
// (not modified).
func applyStatus(prev v1alpha1.LatencyNodeStatus, in applyInput) v1alpha1.LatencyNodeStatus {
	st := *prev.DeepCopy()
	spec := in.Node.Spec
	st.Profile, st.ProfileGeneration = spec.Profile, spec.ProfileGeneration
	st.Kernel = kernel(in.Kernel)
	all := sortedSettings(SummariseIRQs(append(append(append([]v1alpha1.SettingResult{}, in.Report.Results...),
		withHeld(in.Results, in.Report.Held)...), unsettled(in.Report.Restored)...)))
	st.Settings, st.SettingsOmitted = capSettings(all)
	st.HeldThreads = heldThreads(prev, in.Report, in.Err)
	st.Findings = nil // the last window's findings are added after the pass
	gen := in.Node.Generation
	setCondition(&st, appliedCondition(in.Err, all, st.SettingsOmitted), gen, in.Now)
	setCondition(&st, driftCondition(in.Report.Drifts, in.IRQBalancePID), gen, in.Now)
	if in.Boot != nil {
		st.Boot = in.Boot
		setCondition(&st, bootRebootCondition(in.Boot), gen, in.Now)
	} else {
		setCondition(&st, rebootCondition(spec.Tuning.CPUs, in.Kernel.CmdlineIsolation), gen, in.Now)
	}
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.NodeReverted)
	if in.Err == nil {
		st.ObservedGeneration = gen
	}
	if in.Err == nil && (in.Report.Written > in.Reasserted || st.LastAppliedTime == nil) {
		// As the API server stores it, whole seconds: a window pass copies
		// this status and compares it with the stored one
		// (TestWindowAfterAnApplyWritesNothing).
		t := metav1.NewTime(in.Now.UTC().Truncate(time.Second))
		st.LastAppliedTime = &t
	}
	return st
}

// revertInput is everything one Revert pass tells status.
type revertInput struct {
	Node   *v1alpha1.LatencyNode // nil when the LatencyNode is gone
	Report apply.Report
	Err    error
	Kernel v1alpha1.KernelFacts
	Now    metav1.Time
}

// revertStatus is the status after a Revert pass.
func revertStatus(prev v1alpha1.LatencyNodeStatus, in revertInput) v1alpha1.LatencyNodeStatus {
	st := *prev.DeepCopy()
	st.Kernel = kernel(in.Kernel)
	st.Findings = nil
	gen := in.Node.Generation
	rev := revertedCondition(in.Err, in.Report)
	if done := meta.FindStatusCondition(prev.Conditions, v1alpha1.NodeReverted); done != nil &&
		done.Status == metav1.ConditionTrue && nothingToRevert(in) {
		// The journal is gone: keep what the revert that cleared it
		// reported (conflicts included) instead of "0 restored".
		rev = *done
	} else {
		st.Settings, st.SettingsOmitted = capSettings(sortedSettings(SummariseIRQs(in.Report.Results)))
	}
	st.HeldThreads = heldThreads(prev, in.Report, in.Err)
	setCondition(&st, rev, gen, in.Now)
	if rev.Status == metav1.ConditionTrue {
		st.Profile, st.ProfileGeneration = "", 0
		st.ObservedGeneration = gen
		setCondition(&st, metav1.Condition{Type: v1alpha1.NodeApplied, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonRevertComplete, Message: "the node's originals are restored"}, gen, in.Now)
	} else {
		setCondition(&st, metav1.Condition{Type: v1alpha1.NodeApplied, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonReverting, Message: "reverting to the journaled originals"}, gen, in.Now)
	}
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.NodeDrifted)
	return st
}

// baselineStatus is the status after a Baseline pass: the node is the
// profile's, nothing is applied, nothing drifts.
func baselineStatus(prev v1alpha1.LatencyNodeStatus, ln *v1alpha1.LatencyNode, kf v1alpha1.KernelFacts, now metav1.Time) v1alpha1.LatencyNodeStatus {
	st := *prev.DeepCopy()
	st.Profile, st.ProfileGeneration = ln.Spec.Profile, ln.Spec.ProfileGeneration
	st.Kernel = kernel(kf)
	st.Settings, st.SettingsOmitted, st.Findings = nil, 0, nil
	st.ObservedGeneration = ln.Generation
	setCondition(&st, metav1.Condition{Type: v1alpha1.NodeApplied, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonMeasuringBaseline, Message: "measuring the node's baseline; nothing is written to the kernel"}, ln.Generation, now)
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.NodeDrifted)
	meta.RemoveStatusCondition(&st.Conditions, v1alpha1.NodeReverted)
	return st
}

// heldThreads is the engine's count of thread policies still journaled; a
// failed pass may not have read the journal (lock, corrupt file), so it
// keeps the last count rather than report none and let the manager
// withdraw the hostPID that restoring them needs.
func heldThreads(prev v1alpha1.LatencyNodeStatus, rep apply.Report, err error) int32 {
	if err != nil {
		return max(prev.HeldThreads, int32(rep.HeldThreads))
	}
	return int32(rep.HeldThreads)
}

// nothingToRevert says a Revert pass found no journal and did nothing.
func nothingToRevert(in revertInput) bool {
	return in.Err == nil && in.Report.Written == 0 && len(in.Report.Results) == 0
}

// withHeld adds the settings left as applied to the render's results: a
// setting the render already reports (the pod without a cgroup) says it was
// left as applied in its own message; the others get a result of their own.
func withHeld(results, held []v1alpha1.SettingResult) []v1alpha1.SettingResult {
	out := slices.Clone(results)
	for _, h := range held {
		i := slices.IndexFunc(out, func(r v1alpha1.SettingResult) bool { return r.Setting == h.Setting })
		if i < 0 {
			out = append(out, h)
			continue
		}
		out[i].Message = bound.String(out[i].Message+"; "+h.Message, bound.SettingMessage)
		if out[i].Desired == "" {
			out[i].Desired = h.Desired
		}
	}
	return out
}

// unsettled keeps the restore results a human must see (not plain success).
func unsettled(rs []v1alpha1.SettingResult) []v1alpha1.SettingResult {
	var out []v1alpha1.SettingResult
	for _, r := range rs {
		if r.State != v1alpha1.SettingReverted {
			out = append(out, r)
		}
	}
	return out
}

// sortedSettings bounds each setting's strings and orders the settings the
// same way whatever order they came in (pods come from the informer cache in
// no set order, and a reordered list is a status write): those a human must
// act on first (Failed, Invalid, Conflict), then Immovable and Unsupported,
// then the rest, each group by setting.
func sortedSettings(rs []v1alpha1.SettingResult) []v1alpha1.SettingResult {
	out := make([]v1alpha1.SettingResult, len(rs))
	for i, r := range rs {
		r.Setting = bound.String(r.Setting, bound.SettingValue)
		r.Desired, r.Actual = bound.String(r.Desired, bound.SettingValue), bound.String(r.Actual, bound.SettingValue)
		r.Message = bound.String(r.Message, bound.SettingMessage)
		r.Owner = bound.String(r.Owner, bound.SettingOwner)
		out[i] = r
	}
	slices.SortFunc(out, func(a, b v1alpha1.SettingResult) int {
		return cmp.Or(cmp.Compare(stateRank(a.State), stateRank(b.State)), strings.Compare(a.Setting, b.Setting),
			strings.Compare(string(a.State), string(b.State)), strings.Compare(a.Desired, b.Desired),
			strings.Compare(a.Actual, b.Actual), strings.Compare(a.Message, b.Message))
	})
	return out
}

// capSettings keeps the first bound.Settings of sorted settings (so the
// failed and conflicting ones) and says how many settings it left out (a
// summarised IRQ line counts its IRQs).
func capSettings(sorted []v1alpha1.SettingResult) ([]v1alpha1.SettingResult, int32) {
	if len(sorted) == 0 {
		return nil, 0
	}
	kept := first(sorted, bound.Settings)
	return kept, int32(settingCount(sorted[len(kept):]))
}

// stateRank puts the states a human must act on first.
func stateRank(s v1alpha1.SettingState) int {
	switch s {
	case v1alpha1.SettingFailed, v1alpha1.SettingInvalid, v1alpha1.SettingConflict, v1alpha1.SettingFallback:
		return 0
	case v1alpha1.SettingImmovable, v1alpha1.SettingUnsupported, v1alpha1.SettingOwnedBy:
		return 1
	}
	return 2
}

// kernel is the facts as status holds them: within the CRD's limits.
func kernel(f v1alpha1.KernelFacts) *v1alpha1.KernelFacts {
	b := facts.Bound(f)
	return &b
}

func boundFindings(fs []v1alpha1.Finding) []v1alpha1.Finding {
	fs = slices.Clone(first(fs, bound.Findings))
	for i := range fs {
		fs[i].Message = bound.String(fs[i].Message, bound.FindingMessage)
	}
	if len(fs) == 0 {
		return nil
	}
	return fs
}

func first[T any](s []T, n int) []T {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// equalStatus compares statuses the way the loop decides whether to patch.
func equalStatus(a, b v1alpha1.LatencyNodeStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}
