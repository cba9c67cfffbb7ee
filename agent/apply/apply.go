// Package apply is the engine that carries a plan out on the host: read →
// plan → journal originals → write in knob order → verify by reading back;
// and revert: walk the journal backwards and restore each original where the
// kernel still holds a value the agent wrote, reporting a Conflict where
// someone else changed it since. It knows knobs and the journal only, never
// what a knob means.
package apply

import (
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/access"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/plan"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Stage names a point in Apply or Revert where a test may crash the agent.
type Stage string

const (
	// StageJournaled: the journal holds the originals, nothing written yet.
	StageJournaled Stage = "journaled"
	// StageWritten: one knob was written (id is its ID).
	StageWritten Stage = "written"
	// StageRestored: one original was written back during revert.
	StageRestored Stage = "restored"
)

// ErrJournalCorrupt is returned when the journal cannot be trusted and
// could not be moved aside (Preview, or a failed rename); nothing is
// written then.
var ErrJournalCorrupt = journal.ErrCorrupt

// Engine applies and reverts knobs on one host.
type Engine struct {
	Root *host.Root
	Log  logr.Logger
	// Hook, when set, is called at each Stage: crash-safety tests crash
	// there; the agent loop counts each as progress for its liveness.
	Hook func(stage Stage, id string)
	// HostTool runs a host tool a setting needs (update-grub for staged
	// boot arguments); nil: a transient unit through the host's systemd.
	HostTool knob.RunFunc
}

// Meta says which spec the knobs come from; it is journaled.
type Meta struct {
	Profile    string
	Generation int64
	// Undetermined are setting scopes the render could not work out this
	// pass (see covers); journaled settings under them are neither
	// restored nor re-applied, only reported in Report.Held. Not journaled.
	Undetermined []string
	// Owner says which knobs another writer on the node owns
	// (agent/owners): they are reported OwnedBy and never written; a
	// journaled one is neither restored nor re-applied. Not journaled.
	Owner plan.OwnerOf
}

// Drift is a setting someone else changed after the agent verified it.
type Drift struct {
	ID     string
	Label  string
	Ours   string
	Theirs string
}

// Report is what one Apply or Revert did.
type Report struct {
	// Results are per-setting outcomes in knob (or journal) order.
	Results []v1alpha1.SettingResult
	// Restored are settings a changed spec no longer wants, restored
	// during Apply.
	Restored []v1alpha1.SettingResult
	// Held are journaled settings under Meta.Undetermined, left as
	// applied this pass (state Failed, saying why).
	Held []v1alpha1.SettingResult
	// Drifts are settings found changed by someone else and re-asserted.
	Drifts []Drift
	// Written counts kernel writes.
	Written int
	// Notes are one-line remarks for humans (discarded journal, ...).
	Notes []string
	// HeldThreads counts the threads whose scheduling policy the agent
	// changed and has not yet restored (still journaled after the pass):
	// restoring them needs sched_setattr in the host's pid namespace, so
	// the manager keeps the agent's hostPID while any agent holds one. It
	// comes from the journal, never from the bounded status list.
	HeldThreads int
}

// heldThreads counts j's entries the agent wrote whose restore needs the
// host's pid namespace (threads' policies).
func heldThreads(j *journal.Journal) int {
	n := 0
	for _, en := range j.Entries {
		if needsHostPID(en) && (len(en.Written) > 0 || en.OriginalUnknown) {
			n++
		}
	}
	return n
}

// needsHostPID reports whether restoring en needs the host's pid namespace.
func needsHostPID(en journal.Entry) bool {
	acc, err := access.Entry(en)
	return err == nil && acc.NeedsHostPID
}

// Conflicts counts Conflict results.
func (r Report) Conflicts() []v1alpha1.SettingResult {
	var out []v1alpha1.SettingResult
	for _, res := range append(slices.Clone(r.Results), r.Restored...) {
		if res.State == v1alpha1.SettingConflict {
			out = append(out, res)
		}
	}
	return out
}

func (e *Engine) hook(s Stage, id string) {
	if e.Hook != nil {
		e.Hook(s, id)
	}
}

// load reads the journal and starts a fresh one when there is none or when
// it belongs to an earlier boot (whose originals the reboot already undid).
// With mayRecover set (the caller holds the lock) a corrupt journal is moved
// aside and replaced (see recoverCorrupt); without, it is an error.
func (e *Engine) load(rep *Report, mayRecover bool) (*journal.Journal, error) {
	boot, err := journal.BootID(e.Root)
	if err != nil {
		return nil, err
	}
	j, err := e.loadJournal()
	if errors.Is(err, journal.ErrCorrupt) && mayRecover {
		return e.recoverCorrupt(boot, err, rep)
	}
	if err != nil {
		return nil, err
	}
	if j != nil && j.BootID != boot {
		e.Log.Info("Discarded journal from an earlier boot", "journalBoot", j.BootID, "boot", boot, "entries", len(j.Entries))
		rep.Notes = append(rep.Notes, fmt.Sprintf("discarded journal of boot %s: the reboot restored boot values; originals re-read", j.BootID))
		if keep := carryOver(j, boot); len(keep.Entries) > 0 {
			return keep, nil
		}
		j = nil
	}
	if j == nil {
		j = journal.New(boot)
	}
	return j, nil
}

// dryRun is what Apply would do, computed without writing anything.
type dryRun struct {
	Plan plan.Plan
	// Orphans are journaled settings Apply would restore first.
	Orphans []journal.Entry
}

// Preview plans knobs against the host without writing (agent plan).
func (e *Engine) Preview(knobs []knob.Knob) (dryRun, error) {
	var rep Report
	j, err := e.load(&rep, false)
	if err != nil {
		return dryRun{}, fmt.Errorf("%w (apply and revert move it aside)", err)
	}
	var d dryRun
	for _, id := range restoreOrder(j, knobs) {
		d.Orphans = append(d.Orphans, *j.Find(id))
	}
	d.Plan = plan.Make(knobs, e.observe(knobs), verified(j))
	return d, nil
}

// lock serialises engines on one host (the DaemonSet agent and a one-shot
// CLI run) with the journal's one lock, so two never interleave journal and
// kernel writes.
func (e *Engine) lock() (unlock func(), err error) {
	return journal.Lock(e.Root)
}

// Apply brings the host to knobs: restores journaled settings the spec no
// longer wants, journals the originals of everything it will change, writes,
// and verifies.
func (e *Engine) Apply(meta Meta, knobs []knob.Knob) (rep Report, err error) {
	unlock, err := e.lock()
	if err != nil {
		return rep, err
	}
	defer unlock()
	j, err := e.load(&rep, true)
	if err != nil {
		return rep, err
	}
	defer func() { rep.HeldThreads = heldThreads(j) }()
	all := knobs
	knobs, owned := plan.Own(knobs, meta.Owner)
	orphans, held := split(restoreOrder(j, knobs), meta.Undetermined)
	orphans = notOwned(orphans, owned)
	rep.Held = heldResults(j, held)
	if len(orphans) > 0 {
		rep.Restored = e.restore(j, orphans, &rep)
		if err := e.save(j); err != nil {
			return rep, err
		}
	}
	p := plan.Make(knobs, e.observe(knobs), verified(j))
	dirty := e.noteSettled(j, p.Settled, knobs)
	p.Changes, rep.Results = skipRefused(j, p.Changes, p.Settled)
	rep.Results = append(rep.Results, owned...)
	for _, c := range p.Changes {
		followWriter(j, c)
		acc := access.Of(c.Knob)
		j.Record(c.Knob.ID, e.rel(acc, c.Knob.Path), c.Knob.RestoreValue(c.From), c.From, c.Knob.Desired).Kind = acc.Name
	}
	j.Profile, j.ProfileGeneration = meta.Profile, meta.Generation
	if len(p.Changes) > 0 || dirty {
		if err := e.save(j); err != nil {
			return rep, fmt.Errorf("journal originals before writing: %w", err)
		}
	}
	if len(p.Changes) == 0 {
		rep.Results = order(unknownOriginals(j, rep.Results), all)
		if len(j.Entries) == 0 && len(rep.Notes) > 0 && j.RecoveredFrom == "" {
			// An earlier boot's journal was discarded and this boot has
			// nothing to journal: drop the stale file.
			return rep, journal.Remove(e.Root)
		}
		return rep, nil
	}
	e.hook(StageJournaled, "")
	for _, c := range p.Changes {
		res := e.write(c)
		en := j.Find(c.Knob.ID)
		switch res.State {
		case v1alpha1.SettingApplied:
			rep.Written++
			en.Verified = c.Knob.Desired
			en.NoteReadBack(res.Actual)
		case v1alpha1.SettingImmovable:
			en.Refused, en.RefusedMessage = c.Knob.Desired, res.Message
		}
		if c.Drift {
			rep.Drifts = append(rep.Drifts, Drift{ID: c.Knob.ID, Label: c.Knob.Label, Ours: c.Knob.Desired, Theirs: c.From})
		}
		rep.Results = append(rep.Results, res)
	}
	rep.Results = order(unknownOriginals(j, rep.Results), all)
	return rep, e.save(j)
}

// notOwned drops from orphans the settings another writer owns now: the
// agent restores nothing there, as it writes nothing there.
func notOwned(orphans []string, owned []v1alpha1.SettingResult) []string {
	return slices.DeleteFunc(orphans, func(id string) bool {
		return slices.ContainsFunc(owned, func(r v1alpha1.SettingResult) bool { return r.Setting == id })
	})
}

// followWriter makes the value another writer set the original of a knob
// whose value that writer owns (knob.OriginalFollowsWriter), when it
// changed the value since the agent verified its own (drift): kubelet
// resizing a pod from 4 CPUs to 1 rewrites its quota, and revert must
// restore the 1-CPU quota, not the 4-CPU one journaled before.
func followWriter(j *journal.Journal, c plan.Change) {
	en := j.Find(c.Knob.ID)
	if !c.Drift || !c.Knob.OriginalFollowsWriter || en == nil || en.OriginalUnknown || en.Ours(c.From, c.Knob.Matches) {
		return
	}
	en.Original, en.OriginalRead = c.Knob.RestoreValue(c.From), ""
	if en.Original != c.From {
		en.OriginalRead = c.From
	}
}

// skipRefused takes out of changes the knobs the kernel already refused as
// immovable this boot (a managed IRQ stays managed), reporting them from the
// journal instead of writing and logging again every pass.
func skipRefused(j *journal.Journal, changes []plan.Change, settled []v1alpha1.SettingResult) ([]plan.Change, []v1alpha1.SettingResult) {
	var keep []plan.Change
	for _, c := range changes {
		en := j.Find(c.Knob.ID)
		if c.Knob.RefusalIsImmovable && en != nil && en.Refused == c.Knob.Desired {
			settled = append(settled, v1alpha1.SettingResult{Setting: c.Knob.ID, Desired: c.Knob.Desired, Actual: c.From,
				State: v1alpha1.SettingImmovable, Message: en.RefusedMessage})
			continue
		}
		keep = append(keep, c)
	}
	return keep, settled
}

// noteSettled journals knobs that already hold the desired value, with the
// value as their original, so a later change by someone else is seen as
// drift. It reports whether the journal changed.
func (e *Engine) noteSettled(j *journal.Journal, settled []v1alpha1.SettingResult, knobs []knob.Knob) bool {
	byID := make(map[string]knob.Knob, len(knobs))
	for _, k := range knobs {
		byID[k.ID] = k
	}
	dirty := false
	for _, r := range settled {
		if r.State != v1alpha1.SettingApplied {
			continue
		}
		if en := j.Find(r.Setting); en != nil {
			if en.Verified != r.Desired {
				en.Verified, dirty = r.Desired, true
			}
			continue
		}
		k := byID[r.Setting]
		acc := access.Of(k)
		en := journal.Entry{ID: r.Setting, Kind: acc.Name, Path: e.rel(acc, k.Path), Original: k.RestoreValue(r.Actual), Verified: r.Desired}
		if en.Original != r.Actual {
			en.OriginalRead = r.Actual
		}
		if j.RecoveredFrom != "" {
			// After a corrupt journal the desired value found here may be
			// the agent's own from before: not an original.
			en = journal.Entry{ID: en.ID, Kind: en.Kind, Path: en.Path, Verified: en.Verified, OriginalUnknown: true}
		}
		j.Add(en)
		dirty = true
	}
	return dirty
}

func (e *Engine) save(j *journal.Journal) error {
	return journal.Save(e.Root, j)
}

// loadJournal reads the journal, recording the kind of entries written
// before entries recorded it (access.Migrate).
func (e *Engine) loadJournal() (*journal.Journal, error) {
	j, err := journal.Load(e.Root)
	if j != nil {
		access.Migrate(j)
	}
	return j, err
}
