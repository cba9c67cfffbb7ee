package v1alpha1

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SummarizeNode is what kubectl get latencynodes prints for st: each
// column's figure, or "-" where st has none (printer columns print a
// missing field as an empty cell). The agent writes it with every report.
func SummarizeNode(st LatencyNodeStatus) NodeSummary {
	s := NodeSummary{
		Applied:    conditionStatus(st.Conditions, NodeApplied),
		P99:        durationText(st.RunQueueP99),
		Drift:      conditionStatus(st.Conditions, NodeDrifted),
		Throttled:  orUnknown(st.ThrottledRatio),
		Budget:     conditionStatus(st.Conditions, NodeWithinBudget),
		Reboot:     conditionStatus(st.Conditions, NodeRebootRequired),
		Partitions: SummaryUnknown,
		Boot:       SummaryUnknown,
		NeedsBoot:  SummaryUnknown,
		Kernel:     SummaryUnknown,
		Class:      SummaryUnknown,
	}
	s.BaselineP99, s.PodBaselineP99 = evidenceP99s(st.Baseline)
	_, s.PodP99 = evidenceP99s(st.Current)
	if st.Isolation != nil {
		s.Partitions = orUnknown(string(st.Isolation.Partitions))
		goals := make([]string, len(st.Isolation.NeedsBoot))
		for i, g := range st.Isolation.NeedsBoot {
			goals[i] = string(g)
		}
		s.NeedsBoot = orUnknown(strings.Join(goals, ","))
	}
	if st.Boot != nil {
		s.Boot = orUnknown(string(st.Boot.State))
	}
	if st.Kernel != nil {
		s.Kernel = orUnknown(st.Kernel.Version)
		s.Class = activeClass(st.Kernel)
	}
	return s
}

// activeClass is the kernel's scheduling class in one word: fair, unknown,
// ext:<ops name>, "ext:<ops name> (partial)" where the scheduler takes only
// SCHED_EXT tasks.
func activeClass(k *KernelFacts) string {
	if k.ActiveClass != "ext" || k.SchedExt == nil || k.SchedExt.Ops == "" {
		return orUnknown(k.ActiveClass)
	}
	s := "ext:" + k.SchedExt.Ops
	if k.SchedExt.Partial {
		s += " (partial)"
	}
	return s
}

// evidenceP99s are an evidence window's run-queue and pod p99s.
func evidenceP99s(e *LatencyEvidence) (runQueue, pods string) {
	if e == nil {
		return SummaryUnknown, SummaryUnknown
	}
	pods = SummaryUnknown
	if e.Pods != nil {
		pods = durationText(e.Pods.P99)
	}
	return durationText(e.RunQueue.P99), pods
}

func conditionStatus(cs []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(cs, typ); c != nil {
		return orUnknown(string(c.Status))
	}
	return SummaryUnknown
}

func durationText(d *metav1.Duration) string {
	if d == nil {
		return SummaryUnknown
	}
	return d.Duration.String()
}

func orUnknown(s string) string {
	if s == "" {
		return SummaryUnknown
	}
	return s
}

// SummarizeProfile is what kubectl get latencyprofiles prints for st
// beside the counts: each column's figure, or "-" where st has none
// (printer columns print a missing field as an empty cell). The manager
// writes it with every status write.
func SummarizeProfile(st LatencyProfileStatus) ProfileSummary {
	s := ProfileSummary{
		WorstP99: SummaryUnknown, Throttled: orUnknown(st.MaxThrottledRatio),
		Ready: SummaryUnknown, Reason: SummaryUnknown,
		Rollout: SummaryUnknown, Revision: SummaryUnknown,
		Improved: SummaryUnknown, Unchanged: SummaryUnknown,
		Regressed: SummaryUnknown, Inconclusive: SummaryUnknown,
	}
	if st.WorstRunQueueP99 != nil {
		s.WorstP99 = st.WorstRunQueueP99.Duration.String()
	}
	if c := meta.FindStatusCondition(st.Conditions, ProfileReady); c != nil {
		s.Ready, s.Reason = orUnknown(string(c.Status)), orUnknown(c.Reason)
	}
	if r := st.Rollout; r != nil {
		s.Rollout, s.Revision = orUnknown(string(r.Phase)), orUnknown(r.Revision)
		s.Improved, s.Unchanged = strconv.Itoa(int(r.Improved)), strconv.Itoa(int(r.Unchanged))
		s.Regressed, s.Inconclusive = strconv.Itoa(int(r.Regressed)), strconv.Itoa(int(r.Inconclusive))
	}
	return s
}
