package planner

import (
	"strings"

	"latencytier.io/latencytier/api/v1alpha1"
)

// SlotsInUse counts the nodes holding one of the manager's --max-rebooting
// slots: those whose LatencyNode holds a reboot record, and those this
// manager started (started: it wrote their Draining record) whose record
// the cache does not show yet. It returns what started still needs to
// hold: a started node whose record shows is counted by its record, and
// one whose LatencyNode is gone was released (the selection lifts
// its cordon with the record) and holds no slot, whether or not the cache
// ever showed its record.
func SlotsInUse(started map[string]bool, lns []v1alpha1.LatencyNode) (int, map[string]bool) {
	seen, exists := map[string]bool{}, map[string]bool{}
	for i := range lns {
		exists[lns[i].Name] = true
		if lns[i].Spec.Reboot != nil {
			seen[lns[i].Name] = true
		}
	}
	keep := map[string]bool{}
	for name := range started {
		if exists[name] && !seen[name] {
			keep[name] = true
		}
	}
	return len(seen) + len(keep), keep
}

// BackWaitPrefix starts the status.reboots.message of reboot backs that
// wait for a person; that pause is worked out again each pass, not
// carried over, so the go-ahead lifts it.
const BackWaitPrefix = "reboot back waits for a person: "

// CarriedPause is what a pass starts status.reboots from: a pause (and its
// reason) lasts for the revision, save a reboot back's wait for a person,
// which each pass works out again. Any other message (what is in flight)
// is not carried: the pass says anew what is in flight, so a finished
// rollout does not keep saying it waits for a node.
func CarriedPause(last *v1alpha1.RebootRolloutStatus, target string) (bool, string) {
	if last != nil && last.Revision == target && last.Paused && !strings.HasPrefix(last.Message, BackWaitPrefix) {
		return true, last.Message
	}
	return false, ""
}
