package partition

import (
	"fmt"
	"strings"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/facts"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

// Account is the node's isolation status for a profile's CPUs: which
// mechanisms hold live (partitions, confinement of the system slices, IRQ
// steering), judged from this pass's setting results, and which goals only
// boot parameters give and the command line (cmdline: the isolcpus,
// nohz_full and rcu_nocbs flags as facts.Isolation returns them) does not
// give yet. It is nil when the profile isolates no CPUs.
func Account(cpus *v1alpha1.CPUSpec, node Capability, cmdline []string, results ...[]v1alpha1.SettingResult) *v1alpha1.IsolationStatus {
	if cpus == nil || cpus.Isolated == nil {
		return nil
	}
	isolated, err := cpulist.Parse(*cpus.Isolated)
	if err != nil || isolated.IsEmpty() {
		return nil
	}
	var all []v1alpha1.SettingResult
	for _, rs := range results {
		all = append(all, rs...)
	}
	st := &v1alpha1.IsolationStatus{}
	var msgs []string
	var msg string
	st.Partitions, msg = partitionsState(cpus.Partition, node, all)
	msgs = appendMsg(msgs, "partitions", msg)
	st.Confinement, msg = mechanism(all, isConfinement)
	msgs = appendMsg(msgs, "confinement", msg)
	st.IRQSteering, msg = mechanism(all, func(id string) bool { return settingid.IRQ.Has(id) })
	msgs = appendMsg(msgs, "irqSteering", msg)
	if !isolated.IsSubsetOf(facts.FlagCPUs(cmdline, "nohz_full")) {
		st.NeedsBoot = append(st.NeedsBoot, v1alpha1.BootGoalTick)
	}
	if !isolated.IsSubsetOf(facts.FlagCPUs(cmdline, "rcu_nocbs")) {
		st.NeedsBoot = append(st.NeedsBoot, v1alpha1.BootGoalRCUCallbacks)
	}
	if !managedIRQs(cmdline) || !isolated.IsSubsetOf(facts.FlagCPUs(cmdline, "isolcpus")) {
		st.NeedsBoot = append(st.NeedsBoot, v1alpha1.BootGoalManagedIRQs)
	}
	if m := strings.Join(msgs, "; "); len(m) > 512 {
		st.Message = m[:509] + "..."
	} else {
		st.Message = m
	}
	return st
}

func appendMsg(msgs []string, name, msg string) []string {
	if msg == "" {
		return msgs
	}
	return append(msgs, name+": "+msg)
}

func partitionsState(p v1alpha1.CPUPartition, node Capability, all []v1alpha1.SettingResult) (v1alpha1.IsolationMechanism, string) {
	if p == "" || p == v1alpha1.CPUPartitionNone {
		return v1alpha1.IsolationOff, ""
	}
	if !node.Supported {
		return v1alpha1.IsolationUnsupported, node.Reason
	}
	switch st, msg := mechanism(all, func(id string) bool { return settingid.Partition.Has(id) }); st {
	case v1alpha1.IsolationFailed:
		return st, msg
	case v1alpha1.IsolationOff:
		// Nothing partitioned is not Live: say what it waits for.
		return v1alpha1.IsolationWaiting, "no granted pod holds exclusive CPUs within the isolated CPUs yet"
	}
	return v1alpha1.IsolationLive, ""
}

// isConfinement names the system slices' confinement settings (their
// cpuset.cpus files and systemd's AllowedCPUs, cpuset/<slice>[/...]), not
// the pods' cpusets (cpuset/pod/..., cpuset/pods).
func isConfinement(id string) bool {
	rest, ok := settingid.CPUSet.Rest(id)
	return ok && !strings.HasPrefix(rest, settingid.CPUSetPod.Sub)
}

// mechanism judges the results whose setting is of one mechanism: Off
// with none, Unsupported when one is, Failed when one is neither applied
// nor immovable (an IRQ the kernel will not move is reported, not a
// failure of steering), Live otherwise.
func mechanism(all []v1alpha1.SettingResult, of func(id string) bool) (v1alpha1.IsolationMechanism, string) {
	st, seen := v1alpha1.IsolationLive, false
	var msg string
	for _, r := range all {
		if !of(r.Setting) {
			continue
		}
		seen = true
		switch r.State {
		case v1alpha1.SettingApplied, v1alpha1.SettingImmovable:
		case v1alpha1.SettingUnsupported:
			if st == v1alpha1.IsolationLive {
				st, msg = v1alpha1.IsolationUnsupported, fmt.Sprintf("%s: %s", r.Setting, r.Message)
			}
		default:
			if st != v1alpha1.IsolationFailed {
				st, msg = v1alpha1.IsolationFailed, fmt.Sprintf("%s %s: %s", r.Setting, r.State, r.Message)
			}
		}
	}
	if !seen {
		return v1alpha1.IsolationOff, ""
	}
	return st, msg
}

// managedIRQs reports whether an isolcpus flag has the managed_irq option.
func managedIRQs(cmdline []string) bool {
	for _, f := range cmdline {
		v, ok := strings.CutPrefix(f, "isolcpus=")
		if !ok {
			continue
		}
		for _, opt := range strings.Split(v, ",") {
			if opt == "managed_irq" {
				return true
			}
		}
	}
	return false
}
