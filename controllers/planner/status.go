package planner

import (
	"fmt"
	"strings"

	"latencytier.io/latencytier/api/v1alpha1"
)

// RebootPass is what a profile's reboot pass decided, for its status.
type RebootPass struct {
	Target string
	// Paused and Message: the pause carried over (CarriedPause) or set
	// by this pass (an Abandon, a Stall, reboot backs waiting).
	Paused  bool
	Message string
	// Refused is the first drain's refusal of a pod, "" when none.
	Refused string
	// Acts are the acts the pass carries out, by node.
	Acts map[string]Act
}

// RebootStatus is the profile's status.reboots after pass over lns (the
// profile's LatencyNodes, by name): counts after the acts, the pause or,
// when none, the refusal or what is in flight. nil when no node has
// anything to do with reboots.
func RebootStatus(lns []*v1alpha1.LatencyNode, pass RebootPass) *v1alpha1.RebootRolloutStatus {
	counts := RebootCounts(lns, pass.Acts, pass.Target)
	counts.Revision, counts.Paused, counts.Message = pass.Target, pass.Paused, pass.Message
	if counts.Message == "" {
		counts.Message = pass.Refused
	}
	if counts.Message == "" && (counts.Draining+counts.Rebooting+counts.Verifying) > 0 {
		counts.Message = TruncateReboot(inFlightMessage(lns, pass.Acts))
	}
	if !anyRebootPolicy(lns) && counts == (v1alpha1.RebootRolloutStatus{Revision: pass.Target}) {
		return nil
	}
	return &counts
}

// anyRebootPolicy: some node holds a tuning whose boot policy is Reboot,
// or arguments that need a reboot out.
func anyRebootPolicy(lns []*v1alpha1.LatencyNode) bool {
	for _, ln := range lns {
		if RebootsAllowed(ln) || ln.Spec.Reboot != nil || (ln.Status.Boot != nil && ln.Status.Boot.State == v1alpha1.BootUnstaged) {
			return true
		}
	}
	return false
}

// inFlightMessage names the nodes whose reboot is in flight.
func inFlightMessage(lns []*v1alpha1.LatencyNode, acts map[string]Act) string {
	var list []string
	for _, ln := range lns {
		a, ok := acts[ln.Name]
		switch {
		case ok && (a == Finish || a == Abandon):
		case ok && a == Start, ln.Spec.Reboot != nil:
			list = append(list, ln.Name)
		}
	}
	return "waiting for the reboot of " + Names(list)
}

// TruncateReboot bounds a status.reboots message to its 1024 characters.
func TruncateReboot(s string) string {
	if len(s) > 1024 {
		return s[:1021] + "..."
	}
	return s
}

// Names lists up to five names, then how many more.
func Names(list []string) string {
	if len(list) <= 5 {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(list[:5], ", "), len(list)-5)
}
