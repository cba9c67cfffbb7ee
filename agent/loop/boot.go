package loop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/snapshot"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// planBoot is the pass's boot plan, the agent's earlier staged lines (its
// journal) not counted as conflicts.
func (r *Reconciler) planBoot(ln *v1alpha1.LatencyNode, node snapshot.Node) desired.Boot {
	return desired.PlanBootOn(r.Root, node, ln.Spec.Tuning, ln.Spec.Profile, stagedLines(r.Root))
}

// withBoot adds the plan's knob to the render (last: revert restores it
// first) and, when the plan holds staged arguments as they are, the boot
// scope to the undetermined ones; a Conflict or Unsupported under policy
// Reboot is reported as the setting's result, so status lists it with the
// other settings.
func withBoot(ds desired.State, b desired.Boot, policy v1alpha1.BootPolicy) desired.State {
	if b.Knob != nil {
		ds.Knobs = append(ds.Knobs, *b.Knob)
	}
	if b.Hold {
		ds.Undetermined = append(ds.Undetermined, desired.BootScope)
	}
	if policy == v1alpha1.BootReboot {
		switch b.Status.State {
		case v1alpha1.BootConflict, v1alpha1.BootUnsupported:
			ds.Results = append(ds.Results, v1alpha1.SettingResult{Setting: b.SettingID(),
				State:   v1alpha1.SettingState(b.Status.State),
				Message: bound.String(b.Status.Message, bound.SettingMessage)})
		}
	}
	return ds
}

func bootPolicyOf(t v1alpha1.TuningSpec) v1alpha1.BootPolicy {
	if t.BootParameters != nil && t.BootParameters.Policy == v1alpha1.BootReboot {
		return v1alpha1.BootReboot
	}
	return v1alpha1.BootReportOnly
}

// stagedLines are the argument lines the journal says the agent staged.
func stagedLines(root *host.Root) []string {
	j, err := journal.Load(root)
	if err != nil || j == nil {
		return nil
	}
	var out []string
	for _, id := range []string{bootargs.SettingGRUB, bootargs.SettingSystemdBoot} {
		if en := j.Find(id); en != nil {
			out = append(out, en.Written...)
		}
	}
	return out
}

// bootPass finishes status.boot after the pass's apply or revert: the
// time from boot to the profile first Applied, the managed reboot the
// agent made (its slot given back once done), and a reboot the manager
// asks for, made only when the node's own guard allows it.
func (r *Reconciler) bootPass(ctx context.Context, ln *v1alpha1.LatencyNode, st *v1alpha1.LatencyNodeStatus) {
	switch ln.Spec.Action {
	case v1alpha1.ActionRevert:
		// st.Boot is revertedBoot's, from the revert pass (revert.go).
	case v1alpha1.ActionBaseline:
		return
	}
	if st.Boot == nil {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	now := r.now()
	st.Boot.AppliedAfterBoot = appliedAfterBoot(ln.Status.Boot, st, now)
	rec, err := loadRebootRecord(r.Root)
	if err != nil {
		st.Boot.State, st.Boot.Message = v1alpha1.BootFailed, bound.String(err.Error(), 512)
		return
	}
	rec = r.settleSlot(ctx, ln.Spec.Reboot, rec, st.Boot.BootID)
	d := decideReboot(ln.Spec.Reboot, st.Boot.State, st.Boot.BootID, rec, now, r.failAfter())
	st.Boot.RebootedFor = d.RebootedFor
	if d.Failed != "" {
		st.Boot.State, st.Boot.Message = v1alpha1.BootFailed, bound.String(d.Failed, 512)
	}
	if !d.Reboot {
		r.rebootRefused = ""
		return
	}
	// The node's own guard (guard.go): cordoned by the manager for this
	// revision, and a reboot slot taken. Refused, nothing is written.
	slot, why := r.guardReboot(ctx, d.Record.Revision)
	if why != "" {
		r.refuseReboot(ctx, ln, st, d.Record.Revision, why)
		return
	}
	r.rebootRefused = ""
	d.Record.Slot = slot
	if err := saveRebootRecord(r.Root, d.Record); err != nil {
		st.Boot.State, st.Boot.Message = v1alpha1.BootFailed, bound.String("not rebooting: "+err.Error(), 512)
		return
	}
	log.Info("Rebooting the node through systemd for the manager's request", "revision", d.Record.Revision, "bootID", d.Record.FromBoot)
	if err := r.rebootHost(ctx); err != nil {
		// Not asked again for this revision (the record stands): a reboot
		// that did start must not be doubled. The manager's boot timeout
		// pauses the rollout for a person.
		log.Error(err, "Failed to ask systemd for a reboot", "revision", d.Record.Revision)
		st.Boot.State, st.Boot.Message = v1alpha1.BootFailed, bound.String(fmt.Sprintf("reboot for %s refused: %v", d.Record.Revision, err), 512)
	}
}

// appliedAfterBoot keeps the figure of this boot once known, and otherwise
// measures it at the first pass that finds the profile Applied.
func appliedAfterBoot(prev *v1alpha1.BootStatus, st *v1alpha1.LatencyNodeStatus, now time.Time) *metav1.Duration {
	b := st.Boot
	if prev != nil && prev.BootID == b.BootID && prev.AppliedAfterBoot != nil {
		return prev.AppliedAfterBoot
	}
	if b.BootedAt == nil || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.NodeApplied) {
		return nil
	}
	return &metav1.Duration{Duration: max(now.Sub(b.BootedAt.Time), 0).Truncate(time.Second)}
}

// stagedArgs are the arguments the agent staged before this pass: the
// staging lines of its journal (read before the engine runs: a pass that
// stages nothing removes them) and, once they are removed, the arguments
// an Unstaged report of an earlier pass still lists. Arguments someone
// else put on the command line are not among them.
func stagedArgs(root *host.Root, prev *v1alpha1.BootStatus) []bootargs.Arg {
	var out []bootargs.Arg
	for _, l := range stagedLines(root) {
		out = append(out, bootargs.Parse(l)...)
	}
	if prev != nil && prev.State == v1alpha1.BootUnstaged {
		for _, a := range prev.Arguments {
			out = append(out, bootargs.Parse(a.Argument)...)
		}
	}
	why := map[string]string{}
	if prev != nil {
		for _, a := range prev.Arguments {
			why[a.Argument] = a.Why
		}
	}
	seen := map[string]bool{}
	var uniq []bootargs.Arg
	for _, a := range out {
		if !seen[a.String()] {
			seen[a.String()] = true
			a.Why = why[a.String()]
			uniq = append(uniq, a)
		}
	}
	return uniq
}

// unstaged is status.boot when the pass's spec stages nothing (an apply
// whose plan has no staging knob, or a revert) and the running kernel
// still holds arguments the agent staged earlier (staged) that the plan
// does not list: Unstaged, those first in arguments, so the manager can
// reboot them out after a rollback. Otherwise st as it is. An argument the
// plan lists (policy ReportOnly deriving the same ones) is wanted: it
// stays, as the platform team's to keep or drop.
func unstaged(root *host.Root, cmdline string, staged []bootargs.Arg, st v1alpha1.BootStatus) v1alpha1.BootStatus {
	switch st.State {
	case v1alpha1.BootNotNeeded, v1alpha1.BootPlanned, v1alpha1.BootBooted:
	default:
		return st
	}
	var gone []bootargs.Arg
	for _, a := range staged {
		if !slices.ContainsFunc(st.Arguments, func(p v1alpha1.BootArgument) bool { return p.Argument == a.String() }) {
			gone = append(gone, a)
		}
	}
	booted := bootargs.CheckCmdline(root, cmdline, gone)
	if len(booted.Present) == 0 {
		return st
	}
	var args []v1alpha1.BootArgument
	for _, a := range gone {
		if slices.Contains(booted.Present, a.String()) {
			args = append(args, v1alpha1.BootArgument{Argument: a.String(), Why: a.Why, Present: true})
		}
	}
	st.Arguments = append(args, st.Arguments...)
	if len(st.Arguments) > 16 {
		st.Arguments = st.Arguments[:16]
	}
	st.State = v1alpha1.BootUnstaged
	st.Message = "unstaged: the bootloader no longer holds arguments the agent staged; the running kernel keeps " +
		strings.Join(booted.Present, " ") + " until the node reboots"
	if m := bootargs.Mismatch(root); m != "" {
		st.Message += "; " + m
	}
	st.Message = bound.String(st.Message, 512)
	return st
}

// revertedBoot is status.boot on a reverting node: Unstaged while the
// running kernel holds arguments the agent had staged (staged, read
// before the revert; the drop-in is gone, a reboot drops them), or
// NotNeeded once none is left.
func revertedBoot(root *host.Root, cmdline string, staged []bootargs.Arg) *v1alpha1.BootStatus {
	booted := bootargs.CheckCmdline(root, cmdline, nil)
	st := v1alpha1.BootStatus{State: v1alpha1.BootNotNeeded, BootID: booted.BootID, Backend: bootargs.Detect(root).Name,
		KernelIsolated: booted.Isolated, KernelNohzFull: booted.NohzFull, Message: "reverted: the running kernel holds none of the arguments"}
	if !booted.BootedAt.IsZero() {
		t := metav1.NewTime(booted.BootedAt)
		st.BootedAt = &t
	}
	st = unstaged(root, cmdline, staged, st)
	if st.State == v1alpha1.BootUnstaged {
		st.Message = bound.String("reverted; "+st.Message, 512)
	}
	return &st
}

// bootRebootCondition is RebootRequired from the boot plan: true while the
// running kernel lacks an argument of the plan (or, reverting, still holds
// one the agent removed).
func bootRebootCondition(b *v1alpha1.BootStatus) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.NodeRebootRequired, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonCmdlineMatches}
	var missing []string
	for _, a := range b.Arguments {
		if !a.Present {
			missing = append(missing, a.Argument)
		}
	}
	switch {
	case b.State == v1alpha1.BootUnstaged:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonCmdlineHoldsUnstaged
		c.Message = b.Message
	case b.State == v1alpha1.BootNotNeeded:
		c.Message = "the profile needs no kernel argument"
	case len(missing) == 0:
		c.Message = "the kernel command line holds every argument of the plan"
	case b.State == v1alpha1.BootStaged:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonCmdlineMissingFlags
		c.Message = "staged in the bootloader; a reboot takes: " + strings.Join(missing, " ")
	default:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonCmdlineMissingFlags
		c.Message = "add to the kernel command line and reboot: " + strings.Join(missing, " ")
	}
	return c
}

// renderApply renders the tuning with the boot plan and runs the engine on
// it: one half of an apply pass (apply runs it again when waitsOnWrites).
func (r *Reconciler) renderApply(ctx context.Context, ln *v1alpha1.LatencyNode, node snapshot.Node, layout sysctl.Layout, pods []podcgroup.Pod, podsUnknown error) (desired.State, desired.Boot, apply.Report, error) {
	ds := desired.RenderOn(r.Root, node, layout, ln.Spec.Tuning, pods, r.adminList(ctx))
	if podsUnknown != nil {
		ds.PodsUnknown(ln.Spec.Tuning, podsUnknown)
	}
	r.tierClass(ln, &ds, podsUnknown)
	r.Health.progress()
	boot := r.planBoot(ln, node)
	ds = withBoot(ds, boot, bootPolicyOf(ln.Spec.Tuning))
	r.reportRefusals(ctx, ds.Refusals)
	rep, err := r.Engine.Apply(apply.Meta{Profile: ln.Spec.Profile, Generation: ln.Spec.ProfileGeneration,
		Undetermined: ds.Undetermined, Owner: node.Owners.OwnerOf}, ds.Knobs)
	if err == nil {
		r.syncGranted(ctx, ln, ds)
	}
	return ds, boot, rep, err
}

// waitsOnWrites says the render left settings Failed that became no knob:
// after a boot, those wait for a write of the same pass (a slice's cpuset
// for the cpuset controller the pass enables), so a render after the
// writes may make knobs of them.
func waitsOnWrites(results []v1alpha1.SettingResult) bool {
	return slices.ContainsFunc(results, func(s v1alpha1.SettingResult) bool { return s.State == v1alpha1.SettingFailed })
}

// mergeReports is one pass's report from its two engine runs: the second's
// results (the settings as they are now), both runs' writes, drifts,
// restores and notes.
func mergeReports(first, second apply.Report) apply.Report {
	second.Written += first.Written
	second.Drifts = append(first.Drifts, second.Drifts...)
	second.Restored = append(first.Restored, second.Restored...)
	second.Notes = append(first.Notes, second.Notes...)
	return second
}
