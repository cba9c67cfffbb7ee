package apply

import (
	"fmt"
	"slices"
	"strings"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/plan"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// MaxRestoreAttempts bounds how many passes a restore that fails (a read
// or write error other than "gone": EPERM, EIO) is retried before it is
// given up and reported as a Conflict, so a revert (and a profile deletion
// waiting on it) completes.
const MaxRestoreAttempts = 5

// Revert restores every journaled original, newest first, and removes the
// journal once nothing is left to restore.
func (e *Engine) Revert() (Report, error) {
	var rep Report
	unlock, err := e.lock()
	if err != nil {
		return rep, err
	}
	defer unlock()
	boot, err := journal.BootID(e.Root)
	if err != nil {
		return rep, err
	}
	j, err := journal.Load(e.Root)
	if err != nil || j == nil {
		return rep, err
	}
	if j.BootID != boot {
		rep.Notes = append(rep.Notes, fmt.Sprintf("journal of boot %s discarded: the reboot already restored boot values", j.BootID))
		return rep, journal.Remove(e.Root)
	}
	all := ids(j)
	slices.Reverse(all)
	rep.Results = e.restore(j, all, &rep)
	if len(j.Entries) > 0 {
		return rep, e.save(j)
	}
	return rep, journal.Remove(e.Root)
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
	if en.Path == "" || len(en.Written) == 0 {
		res.Message = "never changed by the agent"
		return res, true, false
	}
	path := e.abs(en.Path)
	cur, err := e.read(path)
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
	if err := e.writePath(path, en.Original); err != nil {
		res.State, res.Message = v1alpha1.SettingFailed, kerr.Classify("write", path, err).Error()
		return res, false, false
	}
	e.hook(StageRestored, en.ID)
	if now, err := e.read(path); err == nil {
		res.Actual = now
	}
	return res, true, true
}

func oursList(w []string) string {
	q := make([]string, len(w))
	for i, v := range w {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, " or ")
}

// Equal is the comparison revert uses without a knob at hand: values equal
// after collapsing whitespace, or cpulists naming the same CPUs.
func Equal(a, b string) bool {
	fa, fb := strings.Join(strings.Fields(a), " "), strings.Join(strings.Fields(b), " ")
	if fa == fb {
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
