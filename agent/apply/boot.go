package apply

import (
	"latencytier.io/latencytier/agent/access"
	"latencytier.io/latencytier/agent/journal"
)

// survivors are the entries of an earlier boot's journal that the reboot did
// not undo: values kept on disk (knob.Access.SurvivesReboot: staged boot
// arguments), whose originals (and what the agent wrote) still hold and
// revert still needs.
func survivors(old *journal.Journal) []journal.Entry {
	var keep []journal.Entry
	for _, en := range old.Entries {
		if acc, err := access.Entry(en); err == nil && acc.SurvivesReboot {
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
