package apply

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"latencytier.io/latencytier/agent/access"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/plan"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// MaxRestoreAttempts bounds how many passes a restore that fails (a read
// or write error other than "gone": EPERM, EIO) is retried before it is
// given up and reported as a Conflict, so a revert (and a profile deletion
// waiting on it) completes. A thread's scheduling policy is never given
// up: a real-time policy left behind keeps a tenant's thread at a priority
// no profile grants any more, so its entry stays journaled, reported Failed
// and counted in HeldThreads until it is restored or the thread is gone
// (exited, or its tid now names a thread with another start time).
const MaxRestoreAttempts = 5

// Revert restores every journaled original, newest first, and removes the
// journal once nothing is left to restore; then it gives back what the agent
// acquired to reach some kinds' knobs (access.Releasers: the debugfs it
// mounted).
func (e *Engine) Revert() (Report, error) {
	var rep Report
	unlock, err := e.lock()
	if err != nil {
		return rep, err
	}
	defer unlock()
	left, err := e.revert(&rep)
	if err != nil || left > 0 {
		return rep, err
	}
	// What the agent acquired to reach some knobs (access.Releasers) is
	// given back now that nothing is journaled. A failure (EBUSY: someone
	// uses debugfs) is a note, kept for the next pass, not a failed
	// revert: every setting is restored.
	for _, rel := range access.Releasers {
		switch note, err := rel.Release(e.Root); {
		case err != nil:
			e.Log.Info("Left a resource the agent acquired", "resource", rel.Name, "error", err.Error())
			rep.Notes = append(rep.Notes, err.Error())
		case note != "":
			e.Log.Info("Released a resource the agent acquired", "resource", rel.Name, "note", note)
			rep.Notes = append(rep.Notes, note)
		}
	}
	return rep, nil
}

// revert is Revert under the lock; left counts the entries still journaled.
func (e *Engine) revert(rep *Report) (left int, err error) {
	boot, err := journal.BootID(e.Root)
	if err != nil {
		return 0, err
	}
	j, err := e.loadJournal()
	if errors.Is(err, journal.ErrCorrupt) {
		j, err = e.recoverCorrupt(boot, err, rep)
		if err == nil && j.RecoveredFrom != "" {
			rep.Results = append(rep.Results, v1alpha1.SettingResult{Setting: "journal", State: v1alpha1.SettingConflict,
				Message: fmt.Sprintf("the journal was corrupt and is moved to %s: the originals of what the agent changed this boot are unknown, so nothing was restored; restore them by hand (the moved file may show them) or reboot the node", j.RecoveredFrom)})
		}
		return 0, err
	}
	if err != nil || j == nil {
		return 0, err
	}
	if j.BootID != boot {
		rep.Notes = append(rep.Notes, fmt.Sprintf("journal of boot %s discarded: the reboot already restored boot values", j.BootID))
		if j = carryOver(j, boot); len(j.Entries) == 0 {
			return 0, journal.Remove(e.Root)
		}
	}
	if len(j.Entries) == 0 && j.RecoveredFrom != "" {
		return 0, nil // a recovered journal with nothing left to restore
	}
	all := ids(j)
	slices.Reverse(all)
	rep.Results = e.restore(j, all, rep)
	rep.HeldThreads = heldThreads(j)
	if len(j.Entries) > 0 || j.RecoveredFrom != "" {
		// A recovered journal stays (empty) for the rest of the boot: the
		// kernel may still hold values of the agent's whose originals are
		// lost, and a later apply must not take them for originals.
		return len(j.Entries), e.save(j)
	}
	return 0, journal.Remove(e.Root)
}

// recoverCorrupt moves a corrupt journal aside and starts a fresh one. When
// the corrupt file predates this boot its originals are moot (the reboot
// restored boot values) and the fresh journal is an ordinary one. Otherwise
// the kernel may hold values the agent wrote and whose originals are lost:
// the fresh journal is marked recovered and saved at once, so this and
// every later pass this boot journals a setting found at its desired value
// as OriginalUnknown instead of taking the agent's own value for the
// original. The caller holds the lock.
func (e *Engine) recoverCorrupt(boot string, cause error, rep *Report) (*journal.Journal, error) {
	aside, earlier, err := journal.Quarantine(e.Root, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%w; %w", cause, err)
	}
	name := filepath.Base(aside)
	j := journal.New(boot)
	if earlier {
		e.Log.Info("Moved aside a corrupt journal from an earlier boot", "file", aside, "error", cause.Error())
		rep.Notes = append(rep.Notes, fmt.Sprintf("corrupt journal of an earlier boot moved to %s: the reboot restored boot values; originals re-read", name))
		return j, nil
	}
	e.Log.Error(cause, "Moved aside a corrupt journal; settings found at their desired value are kept with unknown originals", "file", aside)
	rep.Notes = append(rep.Notes, fmt.Sprintf("corrupt journal moved to %s; until the node reboots, a setting found at its desired value has an unknown original and revert leaves it", name))
	j.RecoveredFrom = name
	return j, e.save(j)
}

// restore reverts the given journaled IDs in the given order, dropping each
// entry that is settled (restored, already original, gone, or conflicting)
// and keeping those whose restore failed.
func (e *Engine) restore(j *journal.Journal, idsInOrder []string, rep *Report) []v1alpha1.SettingResult {
	var out []v1alpha1.SettingResult
	for _, id := range idsInOrder {
		en := j.Find(id)
		res, settled, wrote := e.restoreOne(*en)
		if wrote {
			rep.Written++
		}
		if !settled {
			res, settled = e.giveUp(en, res)
		}
		if settled {
			j.Drop(id)
		}
		out = append(out, res)
	}
	return out
}

// giveUp counts a failed restore of en and, once MaxRestoreAttempts passes
// have failed, settles it as a Conflict that names the original and the
// path, so a human can restore it by hand and the revert can complete.
func (e *Engine) giveUp(en *journal.Entry, res v1alpha1.SettingResult) (v1alpha1.SettingResult, bool) {
	en.RestoreFailures++
	if needsHostPID(*en) {
		res.Message = fmt.Sprintf("%s (attempt %d; a thread's policy is retried until it is restored or the thread exits)", res.Message, en.RestoreFailures)
		return res, false
	}
	if en.RestoreFailures < MaxRestoreAttempts {
		res.Message = fmt.Sprintf("%s (attempt %d of %d)", res.Message, en.RestoreFailures, MaxRestoreAttempts)
		return res, false
	}
	e.Log.Info("Gave up restoring a setting", "setting", en.ID, "original", en.Original, "path", en.Path, "attempts", en.RestoreFailures, "error", res.Message)
	res.State = v1alpha1.SettingConflict
	res.Message = fmt.Sprintf("could not restore original %q to %s in %d passes (%s); left in place: restore it by hand",
		en.Original, en.Path, en.RestoreFailures, res.Message)
	return res, true
}

// restoreOne reverts one entry; settled says the entry can leave the
// journal, wrote that the original was written back.
func (e *Engine) restoreOne(en journal.Entry) (res v1alpha1.SettingResult, settled, wrote bool) {
	res = v1alpha1.SettingResult{Setting: en.ID, Desired: en.Original, State: v1alpha1.SettingReverted}
	acc, accErr := access.Entry(en)
	if en.OriginalUnknown {
		res.State = v1alpha1.SettingConflict
		res.Message = "original unknown: it was found at the desired value after a corrupt journal was moved aside; left in place: restore it by hand or reboot the node"
		if accErr == nil {
			res.Actual, _ = acc.Read(e.env(), e.abs(acc, en.Path))
		}
		return res, true, false
	}
	if en.Path == "" || len(en.Written) == 0 {
		res.Message = "never changed by the agent"
		return res, true, false
	}
	if accErr != nil {
		res.State, res.Message = v1alpha1.SettingFailed, accErr.Error()
		return res, false, false
	}
	env, path := e.env(), e.abs(acc, en.Path)
	cur, err := acc.Read(env, path)
	if err != nil {
		err = kerr.Classify("read", path, err)
		if kerr.ClassOf(err) == kerr.Unsupported {
			res.Message = "gone from the host (device or cgroup removed)"
			return res, true, false
		}
		res.State, res.Message = v1alpha1.SettingFailed, err.Error()
		return res, false, false
	}
	res.Actual = cur
	ours := func(v string) bool { return en.Ours(v, Equal) }
	switch plan.Revert(cur, en.Read(), ours, Equal) {
	case plan.RevertNothing:
		res.Message = "already at the original value"
		return res, true, false
	case plan.RevertConflict:
		res.State = v1alpha1.SettingConflict
		res.Message = fmt.Sprintf("changed by someone else since the agent wrote it (ours %s, theirs %q); left in place", oursList(en.Written), cur)
		e.Log.Info("Left a setting someone else changed", "setting", en.ID, "ours", en.Written, "theirs", cur)
		return res, true, false
	}
	if err := acc.Write(env, path, en.Original); err != nil {
		var sub *knob.Substituted
		if !errors.As(err, &sub) {
			res.State, res.Message = v1alpha1.SettingFailed, kerr.Classify("write", path, err).Error()
			return res, false, false
		}
		// The kernel refused the original and the Access wrote its
		// equivalent (knob.Substituted): restored, with the reason.
		res.Message = sub.Error()
		e.Log.Info("Restored a setting as an equivalent of its original", "setting", en.ID, "original", en.Original, "wrote", sub.Wrote, "reason", sub.Reason)
	}
	e.hook(StageRestored, en.ID)
	if now, err := acc.Read(env, path); err == nil {
		res.Actual = now
	}
	return res, true, true
}

// unknownOriginalMessage marks an applied setting whose original was lost
// with a corrupt journal: revert will leave it.
const unknownOriginalMessage = "original unknown (a corrupt journal was moved aside this boot): revert will leave this value"

// unknownOriginals says so on the applied results of settings journaled
// with an unknown original, so status shows it before anyone reverts.
func unknownOriginals(j *journal.Journal, results []v1alpha1.SettingResult) []v1alpha1.SettingResult {
	for i, r := range results {
		if en := j.Find(r.Setting); en != nil && en.OriginalUnknown && r.State == v1alpha1.SettingApplied && r.Message == "" {
			results[i].Message = unknownOriginalMessage
		}
	}
	return results
}

func oursList(w []string) string {
	q := make([]string, len(w))
	for i, v := range w {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, " or ")
}

// Equal is access.SameValue, the comparison revert uses without a knob at
// hand.
func Equal(a, b string) bool { return access.SameValue(a, b) }
