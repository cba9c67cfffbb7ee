package apply

import (
	"errors"
	"fmt"

	"latencytier.io/latencytier/agent/access"
	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/plan"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// observe reads each knob's current value for the plan.
func (e *Engine) observe(knobs []knob.Knob) map[string]plan.Observed {
	out := make(map[string]plan.Observed, len(knobs))
	for _, k := range knobs {
		v, err := access.Of(k).Read(e.env(), k.Path)
		out[k.ID] = plan.Observed{Value: v, Err: kerr.Classify("read", k.Path, err)}
	}
	return out
}

func (e *Engine) write(c plan.Change) v1alpha1.SettingResult {
	k, acc, env := c.Knob, access.Of(c.Knob), e.env()
	res := v1alpha1.SettingResult{Setting: k.ID, Desired: k.Desired, Actual: c.From}
	err := kerr.Classify("write", k.Path, acc.Write(env, k.Path, k.Desired))
	e.hook(StageWritten, k.ID)
	if err != nil {
		res.State, res.Message = refusal(k, err)
		if now, rerr := acc.Read(env, k.Path); rerr == nil {
			res.Actual = now
		}
		e.Log.Info("Kernel refused a write", "setting", k.ID, "value", k.Desired, "state", res.State, "error", err.Error())
		return res
	}
	now, err := acc.Read(env, k.Path)
	if err != nil {
		res.State, res.Message = v1alpha1.SettingFailed, fmt.Sprintf("read back after write: %v", err)
		return res
	}
	res.Actual = now
	if !k.Matches(now, k.Desired) {
		res.State = v1alpha1.SettingFailed
		res.Message = fmt.Sprintf("%s holds %q after writing %q", describe(k), now, k.Desired)
		return res
	}
	res.State = v1alpha1.SettingApplied
	if res.Message = e.verify(k); res.Message == "" {
		res.Message = k.Note
	}
	e.Log.V(1).Info("Wrote setting", "setting", k.ID, "from", c.From, "to", k.Desired)
	return res
}

// verify reads VerifyPath; a mismatch is a note, not a failure: the kernel
// moves an IRQ's effective affinity on its next interrupt.
func (e *Engine) verify(k knob.Knob) string {
	if k.VerifyPath == "" {
		return ""
	}
	eff, err := e.Root.ReadString(k.VerifyPath)
	if err != nil {
		return fmt.Sprintf("could not verify %s: %v", k.VerifyPath, err)
	}
	if !k.Verified(eff, k.Desired) {
		return fmt.Sprintf("effective affinity still %s; the kernel moves it on the next interrupt", eff)
	}
	return ""
}

func refusal(k knob.Knob, err error) (v1alpha1.SettingState, string) {
	cls := kerr.ClassOf(err)
	cause := errors.Unwrap(err)
	if rf := (*kerr.Refused)(nil); errors.As(err, &rf) {
		return refusedState(rf.Class), rf.Reason
	}
	switch {
	case k.RefusalIsImmovable && (cls == kerr.Immovable || cls == kerr.Permission):
		return v1alpha1.SettingImmovable, fmt.Sprintf("%s refuses new affinity (%v): managed or per-CPU interrupt", describe(k), cause)
	case cls == kerr.Unsupported:
		return v1alpha1.SettingUnsupported, fmt.Sprintf("%s does not exist on this kernel", k.Path)
	case cls == kerr.Invalid:
		return v1alpha1.SettingInvalid, fmt.Sprintf("kernel refused %q for %s: %v", k.Desired, describe(k), cause)
	default:
		return v1alpha1.SettingFailed, fmt.Sprintf("write %s: %v", describe(k), err)
	}
}

// refusedState is the state of a refusal the agent decided itself; its
// reason is the whole message.
func refusedState(c kerr.Class) v1alpha1.SettingState {
	switch c {
	case kerr.Unsupported:
		return v1alpha1.SettingUnsupported
	case kerr.Invalid:
		return v1alpha1.SettingInvalid
	case kerr.Conflict:
		return v1alpha1.SettingConflict
	}
	return v1alpha1.SettingFailed
}

func describe(k knob.Knob) string {
	if k.Label != "" {
		return k.Label
	}
	return k.ID
}
