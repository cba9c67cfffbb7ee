package apply

import (
	"context"
	"time"

	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/systemd"
)

// hostToolTimeout bounds one host tool run (update-grub on a slow disk).
const hostToolTimeout = 5 * time.Minute

// hostTool runs a host tool for a staged-arguments knob: Engine.HostTool, or
// systemd on the host (a transient unit, never the agent entering the
// host's namespaces).
func (e *Engine) hostTool() bootargs.RunFunc {
	if e.HostTool != nil {
		return e.HostTool
	}
	return func(ctx context.Context, unit string, argv []string) error {
		return systemd.Run(ctx, e.Root, unit, argv, hostToolTimeout)
	}
}

// survivors are the entries of an earlier boot's journal that the reboot did
// not undo: staged boot arguments live in files, so their originals (and
// what the agent wrote) still hold and revert still needs them.
func survivors(old *journal.Journal) []journal.Entry {
	var keep []journal.Entry
	for _, en := range old.Entries {
		if bootargs.Persistent(en.Path) {
			keep = append(keep, en)
		}
	}
	return keep
}

// carryOver is a fresh journal for boot holding old's survivors.
func carryOver(old *journal.Journal, boot string) *journal.Journal {
	j := journal.New(boot)
	for _, en := range survivors(old) {
		j.Add(en)
	}
	return j
}
