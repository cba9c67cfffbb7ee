// Package knob defines the unit the agent plans, journals, applies and
// reverts: one value at one address, with the Access that reads and writes
// it. The setting packages (sysctl, irq, cpuset, cpuquota, systemd,
// rtsched, bootargs) turn intent into Knobs; the plan/journal/apply
// machinery works on Knobs and Accesses only and never needs to know what a
// knob means or which kind it is.
package knob

import "strings"

// Knob is one kernel value the agent manages.
type Knob struct {
	// ID names the setting in status and in the journal, e.g.
	// "scheduler/autogroup", "sysctl/net.core.busy_poll", "irq/24",
	// "cpuset/system.slice" (docs/knobs.md lists the forms).
	ID string
	// Path is the knob's address: the absolute file (already under the
	// host root) for files, or a name its Access understands.
	Path string
	// Access reaches the value at Path; nil means the kind whose Claims
	// accept Path (agent/access), a file when none does.
	Access *Access
	// Desired is the value to write.
	Desired string
	// Equal compares a read-back value with a wanted one; nil means equality
	// of whitespace-trimmed strings. cpulists need "0-1" == "0,1".
	Equal func(actual, want string) bool
	// VerifyPath, when set, is read after a write to confirm the kernel
	// honoured it (effective_affinity_list for IRQs).
	VerifyPath string
	// VerifyMatches compares the VerifyPath value with Desired; nil means
	// Matches. effective_affinity_list is a subset of the requested list.
	VerifyMatches func(verified, want string) bool
	// Label describes the knob for humans in status messages, e.g. the IRQ's
	// name from /proc/interrupts. Optional.
	Label string
	// Note, when set, is the message of the setting's Applied result: how
	// the value is held when that is not plain ("banned through
	// irqbalance's socket (pid 812)"). Optional.
	Note string
	// RefusalIsImmovable marks knobs whose write refusal (EIO, EPERM, EACCES)
	// means the kernel will not move this value (managed or per-CPU IRQs):
	// reported Immovable, not Failed.
	RefusalIsImmovable bool
	// Restore, when set, turns the value read from Path before the first
	// write into the value that writes it back; the journal should record
	// Restore(original) as the original. Files whose read format is not
	// their write format need it: cgroup v2 cgroup.subtree_control reads
	// "cpu io memory" but takes "+cpuset" / "-cpuset". Equal must accept
	// both forms. Optional.
	Restore func(read string) string
	// OriginalFollowsWriter marks a value another writer owns and may
	// change while the agent holds it: kubelet rewrites a pod's CFS quota on
	// an in-place resize. When the agent finds such a value changed by
	// someone else (drift), that value becomes the journaled original, so
	// revert restores what the owner last set, not a stale limit from
	// before the resize.
	OriginalFollowsWriter bool
}

// RestoreValue is the value that puts back what was read from Path.
func (k Knob) RestoreValue(read string) string {
	if k.Restore != nil {
		return k.Restore(read)
	}
	return read
}

// Verified reports whether a value read from VerifyPath satisfies want.
func (k Knob) Verified(verified, want string) bool {
	if k.VerifyMatches != nil {
		return k.VerifyMatches(verified, want)
	}
	return k.Matches(verified, want)
}

// Matches reports whether actual satisfies want under the knob's Equal.
func (k Knob) Matches(actual, want string) bool {
	if k.Equal != nil {
		return k.Equal(actual, want)
	}
	return strings.TrimSpace(actual) == strings.TrimSpace(want)
}

// Ordering: a plan applies knobs in slice order and a revert restores them in
// reverse order. Producers must order knobs so that both directions are legal
// for the kernel (cgroup v1 cpusets: children before parents when shrinking,
// so parents come back first on revert).
