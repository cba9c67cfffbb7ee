package access

import (
	"fmt"
	"strings"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/partition"
	"latencytier.io/latencytier/agent/sysctl"
	"latencytier.io/latencytier/agent/tiersched"
)

// A Releaser gives back, once a revert left nothing journaled, what the
// agent acquired only to reach some kind's knobs. It returns a note for the
// revert's report ("" when it held nothing); an error leaves the resource
// for the next revert and is a note too, never a failed revert: every
// setting is already restored.
type Releaser struct {
	// Name names the resource in the agent's log.
	Name    string
	Release func(root *host.Root) (note string, err error)
}

// Releasers are run by the engine after a complete revert, in order; a
// kind that acquires something to reach its knobs adds a row here.
var Releasers = []Releaser{
	// The scheduler knobs under /sys/kernel/debug/sched need debugfs;
	// the agent mounts it when the host has not, and unmounts only that.
	{Name: "debugfs", Release: func(root *host.Root) (string, error) {
		unmounted, err := sysctl.ReleaseDebugfs(root)
		if err != nil || !unmounted {
			return "", err
		}
		return "unmounted the debugfs the agent mounted at " + root.Sys("kernel", "debug"), nil
	}},
	// An ejection of the tier scheduler blocks its reload until a new
	// revision or a revert: this is the revert's half.
	{Name: "schedext-exit", Release: func(root *host.Root) (string, error) {
		ex, err := tiersched.ReadExit(root)
		if err != nil || ex == nil {
			return "", err
		}
		if err := tiersched.ClearExit(root); err != nil {
			return "", err
		}
		return fmt.Sprintf("cleared the record of the kernel ejecting the tier scheduler (revision %q): a profile may load it again", ex.Revision), nil
	}},
}

// SameValue is the comparison a revert makes without the knob at hand (only
// its journal entry): values equal after collapsing whitespace, cpulists
// naming the same CPUs, or cpuset partition states of one type ("isolated
// invalid (...)", a partition of the agent's the kernel has since
// invalidated, is still its "isolated").
func SameValue(a, b string) bool {
	fa, fb := strings.Join(strings.Fields(a), " "), strings.Join(strings.Fields(b), " ")
	if fa == fb || partition.SameType(fa, fb) {
		return true
	}
	if !isCPUList(fa) || !isCPUList(fb) {
		return false
	}
	sa, err1 := cpulist.Parse(fa)
	sb, err2 := cpulist.Parse(fb)
	return err1 == nil && err2 == nil && sa.Equals(sb)
}

func isCPUList(s string) bool {
	return s != "" && strings.Trim(s, "0123456789,-") == "" && s[0] != '-'
}
