package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
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
	"latencytier.io/latencytier/agent/systemd"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// BootOptions are the agent's side of managed reboots.
type BootOptions struct {
	// Reboot reboots the host; nil: systemd.Reboot (reboot.target over
	// the host's systemd, never sysrq).
	Reboot func(ctx context.Context) error
	// FailAfter is how long after a reboot request an unchanged boot id is
	// reported Failed; <= 0: DefaultRebootFailAfter.
	FailAfter time.Duration
}

// DefaultRebootFailAfter is how long a requested reboot may take to show a
// new boot id before the agent reports it Failed (the manager's bootTimeout
// is what pauses the rollout).
const DefaultRebootFailAfter = 10 * time.Minute

// rebootFile is the agent's record of the managed reboot it asked for, in
// its state directory on the host (it must outlive the boot it ends).
const rebootFile = "reboot.json"

// rebootRecord says "rebooting for Revision from boot FromBoot", written
// (and synced) before the agent asks systemd, so a crash or restart between
// the two never asks again for the same revision.
type rebootRecord struct {
	Revision    string    `json:"revision"`
	FromBoot    string    `json:"fromBoot"`
	RequestedAt time.Time `json:"requestedAt"`
	// Done is the revision of the managed reboot before this one that
	// happened (status.boot.rebootedFor while this one is pending).
	Done string `json:"done,omitempty"`
}

func loadRebootRecord(root *host.Root) (*rebootRecord, error) {
	if _, exists, err := root.CheckStateDir(); err != nil || !exists {
		return nil, err
	}
	b, err := root.ReadOwn(filepath.Join(root.StateDir(), rebootFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the reboot record: %w", err)
	}
	var rec rebootRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Revision == "" || rec.FromBoot == "" {
		return nil, fmt.Errorf("reboot record %s does not parse (%v): the agent asks for no reboot until it is removed", filepath.Join(root.StateDir(), rebootFile), err)
	}
	return &rec, nil
}

// saveRebootRecord writes rec atomically and durably (temp file, fsync,
// rename, fsync of the directory).
func saveRebootRecord(root *host.Root, rec rebootRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := root.WriteOwn(rebootFile, b); err != nil {
		return fmt.Errorf("write the reboot record: %w", err)
	}
	return nil
}

// rebootDecision is what one pass does about a managed reboot.
type rebootDecision struct {
	// Reboot: write Record, then ask systemd.
	Reboot bool
	Record rebootRecord
	// RebootedFor is status.boot.rebootedFor.
	RebootedFor string
	// Failed says why a requested reboot is overdue ("" when it is not).
	Failed string
}

// decideReboot is the pure reboot rule. The agent reboots for spec's
// revision when the manager asks (phase Rebooting), the bootloader holds
// arguments the running kernel lacks (state Staged) or the running kernel
// holds arguments the agent took out of it (Unstaged), the node has not
// booted since the manager asked (spec.bootID) and the agent has never
// asked for this revision (rec). A request whose boot id is unchanged after
// failAfter is reported Failed, never asked again.
func decideReboot(spec *v1alpha1.NodeRebootSpec, state v1alpha1.BootState, bootID string, rec *rebootRecord, now time.Time, failAfter time.Duration) rebootDecision {
	var d rebootDecision
	if rec != nil {
		d.RebootedFor = rec.Done
		if rec.FromBoot != bootID {
			d.RebootedFor = rec.Revision
		}
	}
	if spec == nil || spec.Phase != v1alpha1.RebootRequested {
		return d
	}
	if rec != nil && rec.Revision == spec.Revision {
		if rec.FromBoot == bootID && now.Sub(rec.RequestedAt) >= failAfter {
			d.Failed = fmt.Sprintf("the agent asked systemd to reboot for %s at %s and the node still runs boot %s",
				spec.Revision, rec.RequestedAt.UTC().Format(time.RFC3339), bootID)
		}
		return d
	}
	if (spec.BootID != "" && spec.BootID != bootID) || !rebootTakes(state) || bootID == "" {
		return d
	}
	d.Reboot = true
	d.Record = rebootRecord{Revision: spec.Revision, FromBoot: bootID, RequestedAt: now.UTC(), Done: d.RebootedFor}
	return d
}

// rebootTakes: a reboot changes the kernel's arguments in state.
func rebootTakes(state v1alpha1.BootState) bool {
	return state == v1alpha1.BootStaged || state == v1alpha1.BootUnstaged
}

func (r *Reconciler) failAfter() time.Duration {
	if r.Boot.FailAfter <= 0 {
		return DefaultRebootFailAfter
	}
	return r.Boot.FailAfter
}

func (r *Reconciler) rebootHost(ctx context.Context) error {
	if r.Boot.Reboot != nil {
		return r.Boot.Reboot(ctx)
	}
	return systemd.Reboot(ctx, r.Root)
}

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
// agent made, and a reboot the manager asks for.
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
	d := decideReboot(ln.Spec.Reboot, st.Boot.State, st.Boot.BootID, rec, now, r.failAfter())
	st.Boot.RebootedFor = d.RebootedFor
	if d.Failed != "" {
		st.Boot.State, st.Boot.Message = v1alpha1.BootFailed, bound.String(d.Failed, 512)
	}
	if !d.Reboot {
		return
	}
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
func (r *Reconciler) renderApply(ctx context.Context, ln *v1alpha1.LatencyNode, node snapshot.Node, layout sysctl.Layout, pods []podcgroup.Pod) (desired.State, desired.Boot, apply.Report, error) {
	ds := desired.RenderOn(r.Root, node, layout, ln.Spec.Tuning, pods, r.adminList(ctx))
	r.Health.progress()
	boot := r.planBoot(ln, node)
	ds = withBoot(ds, boot, bootPolicyOf(ln.Spec.Tuning))
	r.reportRefusals(ctx, ds.Refusals)
	rep, err := r.Engine.Apply(apply.Meta{Profile: ln.Spec.Profile, Generation: ln.Spec.ProfileGeneration,
		Undetermined: ds.Undetermined}, ds.Knobs)
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
