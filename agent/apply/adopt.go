package apply

import (
	"errors"
	"fmt"

	"latencytier.io/latencytier/agent/access"
	"latencytier.io/latencytier/agent/journal"
)

// Adopt journals a value the agent had written on its behalf by another
// writer it drives, as if the engine had written it: the NRI plugin's
// real-time policy, which the runtime sets on a container's first thread at
// its creation (rtsched.Started). en's Original restores the setting and its
// Written values are the agent's; revert and a spec that no longer wants it
// restore Original where the kernel still holds one of them, as for any
// journaled write. An entry already journaled keeps its first original.
// A corrupt journal is left for the next Apply or Revert to move aside.
func (e *Engine) Adopt(en journal.Entry) error {
	acc, err := access.Entry(en)
	if err != nil {
		return fmt.Errorf("adopt %s: %w", en.ID, err)
	}
	if en.ID == "" || en.Path == "" || len(en.Written) == 0 {
		return fmt.Errorf("adopt %q: %w", en.ID, errors.New("an adopted entry needs an id, a path and a written value"))
	}
	unlock, err := e.lock()
	if err != nil {
		return err
	}
	defer unlock()
	var rep Report
	j, err := e.load(&rep, false)
	if err != nil {
		return fmt.Errorf("adopt %s: %w", en.ID, err)
	}
	for _, w := range en.Written {
		j.Record(en.ID, e.rel(acc, e.abs(acc, en.Path)), en.Original, en.Original, w).Kind = acc.Name
	}
	if err := e.save(j); err != nil {
		return fmt.Errorf("adopt %s: %w", en.ID, err)
	}
	return nil
}
