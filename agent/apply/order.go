package apply

import (
	"slices"
	"strings"

	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/plan"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// restoreOrder is the journaled settings knobs no longer name, newest
// first, the order Revert uses: knob order is only legal forwards (cgroup v1
// cpuset children shrink before their parent, so parents widen first).
func restoreOrder(j *journal.Journal, knobs []knob.Knob) []string {
	out := plan.Orphans(ids(j), knobs)
	slices.Reverse(out)
	return out
}

// HeldMessage says why a journaled setting was neither restored nor
// re-applied this pass.
const HeldMessage = "could not be determined this pass; left as applied"

// covers reports whether the scope names id: id itself or an ID below it
// ("irq" covers "irq/24", "cpuquota/ns/pod" covers its containers but not
// "cpuquota/ns/pod2").
func covers(scope, id string) bool {
	return id == scope || strings.HasPrefix(id, scope+"/")
}

// split separates the orphans to restore from those under an undetermined
// scope, keeping each list's order.
func split(orphans, undetermined []string) (restore, held []string) {
	for _, id := range orphans {
		if slices.ContainsFunc(undetermined, func(s string) bool { return covers(s, id) }) {
			held = append(held, id)
			continue
		}
		restore = append(restore, id)
	}
	return restore, held
}

func heldResults(j *journal.Journal, held []string) []v1alpha1.SettingResult {
	var out []v1alpha1.SettingResult
	for _, id := range held {
		en := j.Find(id)
		out = append(out, v1alpha1.SettingResult{Setting: id, Desired: en.Verified, State: v1alpha1.SettingFailed, Message: HeldMessage})
	}
	return out
}

func ids(j *journal.Journal) []string {
	out := make([]string, len(j.Entries))
	for i, e := range j.Entries {
		out[i] = e.ID
	}
	return out
}

func verified(j *journal.Journal) map[string]string {
	out := map[string]string{}
	for _, e := range j.Entries {
		if e.Verified != "" {
			out[e.ID] = e.Verified
		}
	}
	return out
}

// order sorts results into knob order; results for IDs not among knobs
// keep their relative order at the end.
func order(results []v1alpha1.SettingResult, knobs []knob.Knob) []v1alpha1.SettingResult {
	pos := make(map[string]int, len(knobs))
	for i, k := range knobs {
		pos[k.ID] = i
	}
	slices.SortStableFunc(results, func(a, b v1alpha1.SettingResult) int {
		pa, oka := pos[a.Setting]
		pb, okb := pos[b.Setting]
		switch {
		case oka && okb:
			return pa - pb
		case oka:
			return -1
		case okb:
			return 1
		}
		return 0
	})
	return results
}
