package v1alpha1

// Labels, annotations and finalizers owned by latencytier. All are qualified
// with latencytier.io/ (or, for AgentLabel, a latencytier- name under the
// node-restriction.kubernetes.io/ prefix) so they never collide with a
// user's keys.
const (
	// ProfileLabel is set by the controller on every node a LatencyProfile
	// owns; workloads target the tier with nodeSelector latencytier.io/profile=<name>.
	ProfileLabel = "latencytier.io/profile"

	// OwnedLabelsAnnotation records, on a Node, the label keys the controller
	// set, so it removes only those and never a label it did not set.
	OwnedLabelsAnnotation = "latencytier.io/owned-labels"

	// AgentLabel on a Node says which agent DaemonSet runs there: the
	// manager sets it to AgentStandard on every node a profile owns or
	// reverts, to AgentHostPID while the node's profile grants realtime or
	// its agent still holds real-time threads, and removes it when the node
	// is done. The agent DaemonSets (config/agent) require it by value. The
	// node-restriction.kubernetes.io/ prefix keeps a node's kubelet from
	// setting it on itself (the NodeRestriction admission plugin), and the
	// ValidatingAdmissionPolicy latencytier-agent-label keeps everyone but
	// the manager from setting it: a node cannot attract the agent, whose
	// token lists pods cluster-wide.
	AgentLabel = "node-restriction.kubernetes.io/latencytier-agent"
	// AgentStandard selects the agent without the host's pid namespace.
	AgentStandard = "standard"
	// AgentHostPID selects the agent with hostPID: sched_setattr names a
	// thread by its tid in the caller's pid namespace, so only this one can
	// set or restore real-time policies.
	AgentHostPID = "hostpid"

	// CPUQuotaAnnotation on a Pod opts it into CFS quota removal when its value
	// is CPUQuotaDisable.
	CPUQuotaAnnotation = "latencytier.io/cpu-quota"

	// CPUQuotaDisable is the CPUQuotaAnnotation value that opts a pod in.
	CPUQuotaDisable = "disable"

	// RebootBackAnnotation on a LatencyProfile is a person's go-ahead for
	// the reboot back of a rolled-back revision: set to that revision
	// (status.rollout.revision), the nodes that booted its arguments are
	// rebooted back into the previous ones. Without it they wait (a
	// rollback rests on one node's verdict; rebooting every rebooted node
	// again is for a person to decide).
	RebootBackAnnotation = "latencytier.io/reboot-back"

	// RevertFinalizer keeps a LatencyProfile until every node it tuned has
	// been reverted.
	RevertFinalizer = "latencytier.io/revert"
)

// LatencyProfile condition types.
const (
	// ProfileReady is True when every matched node applied the profile.
	ProfileReady = "Ready"
	// ProfileProgressing is True while nodes are being applied or reverted.
	ProfileProgressing = "Progressing"
	// ProfileDegraded is True when a node failed, drifted, conflicts or is
	// outside the latency budget.
	ProfileDegraded = "Degraded"
	// ProfileRebootsAllowed, present only under bootParameters.policy
	// Reboot, is True when the arguments may be staged: the profile has a
	// rollout whose canary is smaller than its selection. False
	// (ReasonRebootsNeedRollout, ReasonCanaryNotSmaller) stages nothing on
	// any node: the manager writes the tuning with policy ReportOnly.
	ProfileRebootsAllowed = "RebootsAllowed"
	// ProfileSchedulerClassAccepted, present only while the profile asks
	// for spec.scheduler.class Tier, is True when the manager runs with the
	// TierScheduler feature gate on. False (ReasonFeatureGateDisabled) gives
	// no node the class: the manager acts on the profile without it.
	ProfileSchedulerClassAccepted = "SchedulerClassAccepted"
)

// Reasons of ProfileSchedulerClassAccepted.
const (
	// ReasonFeatureGateEnabled: True; the manager's gate for the class is on.
	ReasonFeatureGateEnabled = "FeatureGateEnabled"
	// ReasonFeatureGateDisabled: False; the message names the gate and
	// the flag that turns it on.
	ReasonFeatureGateDisabled = "FeatureGateDisabled"
)

// Reasons of ProfileRebootsAllowed.
const (
	ReasonCanarySmaller      = "CanarySmallerThanSelection"
	ReasonRebootsNeedRollout = "RebootsNeedRollout"
	ReasonCanaryNotSmaller   = "CanaryNotSmallerThanSelection"
)

// LatencyNode condition types (written by the node's agent).
const (
	// NodeApplied is True when every setting of the spec holds on the node
	// (settings the kernel lacks count as held and are listed Unsupported).
	NodeApplied = "Applied"
	// NodeDrifted is True when something else changed a setting since the
	// agent applied it; the agent re-asserts and says who likely did it.
	NodeDrifted = "Drifted"
	// NodeRebootRequired is True when the kernel command line lacks the
	// isolcpus/nohz_full/rcu_nocbs that the profile's isolated CPUs need.
	NodeRebootRequired = "RebootRequired"
	// NodeWithinBudget is True when the measured latency and throttling are
	// inside the profile's latencyBudget.
	NodeWithinBudget = "WithinBudget"
	// NodeReverted is True once a Revert spec has been fully carried out.
	NodeReverted = "Reverted"
	// NodeRunQueueContention is True when a measured pod's run-queue wait
	// behind others (not its own quota, not its own tasks) stayed at or
	// above measurement.contention.waitPerSecond (and half its own
	// budget's waitPerSecond, where a budget selects it) for
	// raiseAfterWindows windows in a row; False again after
	// clearAfterWindows windows below it; Unknown while no window can
	// tell (ContentionSpec).
	NodeRunQueueContention = "RunQueueContention"
)

// Reasons of NodeRunQueueContention.
const (
	// ReasonWaitBehindOthers: True; the message names the worst pod, its wait
	// behind others and the largest of them.
	ReasonWaitBehindOthers = "WaitBehindOthers"
	// ReasonBelowThreshold: False; no measured pod waited that long behind
	// others for long enough (or not for clearAfterWindows since).
	ReasonBelowThreshold = "BelowThreshold"
	// ReasonNoAttribution: Unknown; the window has no attribution of the
	// measured pods' wait (no eBPF attribution on this node, or it could
	// not be read). Measurement off altogether is ReasonNotMeasured.
	ReasonNoAttribution = "NoAttribution"
	// ReasonNoMeasuredPods: Unknown; no measured pod ran on the node
	// through the window, so there is no one whose wait to judge.
	ReasonNoMeasuredPods = "NoMeasuredPods"
)

// Condition reasons (CamelCase, shared by both kinds).
const (
	ReasonAllNodesApplied = "AllNodesApplied"
	ReasonNoNodesMatched  = "NoNodesMatched"
	ReasonApplying        = "Applying"
	ReasonReverting       = "Reverting"
	ReasonNodesDegraded   = "NodesDegraded"
	ReasonNodeConflict    = "NodeConflict"
	ReasonOutsideBudget   = "OutsideBudget"
	// ReasonStaleReports: the profile's Degraded (and Ready) reason when
	// every degraded node is Stale: its agent has been silent for more
	// than two heartbeat intervals, so what it last said may not hold.
	ReasonStaleReports     = "StaleReports"
	ReasonAsExpected       = "AsExpected"
	ReasonApplied          = "Applied"
	ReasonApplyFailed      = "ApplyFailed"
	ReasonPartiallyApplied = "PartiallyApplied"
	ReasonDriftDetected    = "DriftDetected"
	ReasonNoDrift          = "NoDrift"
	// ReasonPodSettingsReasserted: only pod-scoped settings (a pod's CFS
	// quota, cpuset or threads' policy) drifted, which the pod's owner or
	// kubelet acting for it (an in-place resize) changes: re-asserted, and
	// Drifted stays False so a tenant cannot mark the node drifted.
	ReasonPodSettingsReasserted = "PodSettingsReasserted"
	ReasonCmdlineMissingFlags   = "CmdlineMissingFlags"
	ReasonCmdlineMatches        = "CmdlineMatches"
	ReasonWithinBudget          = "WithinBudget"
	ReasonNoBudget              = "NoBudget"
	ReasonNotMeasured           = "NotMeasured"
	ReasonRevertComplete        = "RevertComplete"
	ReasonRevertConflict        = "RevertConflict"
	ReasonJournalCorrupt        = "JournalCorrupt"
	// ReasonCmdlineHoldsUnstaged: the running kernel holds arguments the
	// agent staged and has since taken out of the bootloader (boot state
	// Unstaged); a reboot takes them out.
	ReasonCmdlineHoldsUnstaged = "CmdlineHoldsUnstaged"
	// ReasonMeasuringBaseline: Applied is False under action Baseline, by
	// design: the agent measures and writes nothing to the kernel.
	ReasonMeasuringBaseline = "MeasuringBaseline"
	// ReasonSchedulerFallback: Applied is False because the kernel ejected
	// latencytier's sched_ext scheduler (setting scheduler/class
	// Fallback): the node runs the fair class, not what its spec asks. It
	// takes precedence over PartiallyApplied, so a rollout fails the node
	// even where settings the kernel refused as Invalid alone would not.
	ReasonSchedulerFallback = "SchedulerFallback"
)

// The LatencyNode condition NodeRuntimeHookConnected and its reasons.
const (
	// NodeRuntimeHookConnected is True while the agent is registered as an
	// NRI plugin of the container runtime (NRI mode): granted containers
	// are created without a quota and on their CPUs. False: the file path
	// tunes them one pass after they start. A Connected message ends with
	// whether the node's containers start with their real-time policy
	// ("real-time policy at creation: set through NRI", "not set through
	// NRI (...)" for the runtime, "not set on this node (...)" for the node).
	NodeRuntimeHookConnected = "RuntimeHookConnected"
	// ReasonHookConnected: registered with the runtime's NRI socket.
	ReasonHookConnected = "Connected"
	// ReasonHookNoSocket: the runtime has no NRI socket (NRI off, or a
	// runtime without NRI).
	ReasonHookNoSocket = "NoSocket"
	// ReasonHookDisconnected: the socket exists but the plugin is not
	// registered (the runtime restarted or refused it); it reconnects with
	// backoff.
	ReasonHookDisconnected = "Disconnected"
)
