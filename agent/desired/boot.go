package desired

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	snap "latencytier.io/latencytier/agent/snapshot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Boot is one pass's plan for the node's kernel command line: the
// arguments this node's CPUs need (every policy: the plan is reported
// before anything reboots), what the running kernel holds, and, under
// policy Reboot on a backend the agent stages, the knob that stages them.
type Boot struct {
	// Status is the boot status before staging; with a Knob its state is
	// settled after the engine ran it (Settle).
	Status v1alpha1.BootStatus
	// Args are the arguments the node needs.
	Args []bootargs.Arg
	// Knob stages Args (nil: nothing is staged this pass, and a drop-in
	// staged before is restored unless Hold).
	Knob *knob.Knob
	// Hold leaves staged arguments as they are: the pass could not work
	// out the plan, or someone else's arguments conflict (nothing is
	// written then, not even a revert).
	Hold bool
}

// BootScope is the journal scope of staged boot arguments (Undetermined).
const BootScope = "boot"

// PlanBoot is PlanBootOn with a node snapshot of its own.
func PlanBoot(root *host.Root, t v1alpha1.TuningSpec, profile string, ours []string) Boot {
	return PlanBootOn(root, snap.Read(root, t), t, profile, ours)
}

// PlanBootOn derives the node's boot plan from the tuning's CPUs (as the
// pass's snapshot node parsed them) and boot parameters, against the
// command line the snapshot read. ours are argument lines the agent staged
// before (its journal): the running command line holding those is the
// agent's own earlier revision, not a conflict. profile names the
// drop-in's owner.
//
// When spec.cpus fails the node's sizing check (CheckSizing) the plan holds
// no isolation arguments (staged ones are taken out), only the others the
// profile asks for, and the status message says why.
func PlanBootOn(root *host.Root, node snap.Node, t v1alpha1.TuningSpec, profile string, ours []string) Boot {
	sized := sizing(root, node.CPUs, t.CPUs)
	if sized == nil {
		return planBoot(root, node, t, profile, ours)
	}
	node.CPUs.Isolated = cpuset.New()
	b := planBoot(root, node, t, profile, ours)
	msg := "no CPU isolation arguments: " + sized.Message
	if b.Status.State != v1alpha1.BootNotNeeded && b.Status.Message != "" {
		msg += "; " + b.Status.Message
	}
	b.Status.Message = msg
	return b
}

func planBoot(root *host.Root, node snap.Node, t v1alpha1.TuningSpec, profile string, ours []string) Boot {
	policy, extras := bootPolicy(t.BootParameters)
	var b Boot
	err := node.CPUs.Err
	if err == nil {
		var online cpuset.CPUSet
		if online, err = cpulist.Online(root); err == nil {
			b.Args, err = bootargs.Derive(online, node.CPUs.Reserved, node.CPUs.Isolated, extras)
		}
	}
	// Every state reports the running boot (its id, when it began): the
	// manager's tuning-ready gate counts Applied only from the node's
	// current boot, plan or no plan.
	backend := bootargs.Detect(root)
	booted := bootargs.CheckCmdline(root, node.Cmdline, b.Args)
	if err != nil {
		b = failedPlan(err)
		b.Status.BootID, b.Status.BootedAt = booted.BootID, observedBoot(backend, nil, booted).BootedAt
		return b
	}
	b.Status = observedBoot(backend, b.Args, booted)
	if len(b.Args) == 0 {
		b.Status.State, b.Status.Message = v1alpha1.BootNotNeeded, "the profile isolates no CPUs and asks for no boot parameter"
		return b
	}
	if conflicts, err := conflicting(root, node.Cmdline, backend, b.Args, ours); err != nil || len(conflicts) > 0 {
		b.Hold = true
		b.Status.State, b.Status.Message = v1alpha1.BootConflict, conflictMessage(conflicts, err)
		return b
	}
	missing := len(booted.Missing) > 0
	switch {
	case policy == v1alpha1.BootReboot && backend.Kind == bootargs.KindGRUB:
		b.Knob = &knob.Knob{ID: bootargs.SettingGRUB, Path: bootargs.GRUBPath(profile), Access: bootargs.Access, Desired: bootargs.Line(b.Args),
			Restore: bootargs.RestoreAbsent, Label: "GRUB drop-in /" + bootargs.DropIn}
		b.Status.State = v1alpha1.BootStaged // settled after the engine ran the knob
	case policy == v1alpha1.BootReboot && backend.Kind == bootargs.KindSystemdBoot:
		// The knob's value is the arguments the agent added; its original
		// is none added (the file's own bytes are kept apart, see
		// bootargs.SystemdBoot).
		b.Knob = &knob.Knob{ID: bootargs.SettingSystemdBoot, Path: bootargs.SystemdBootPath(profile), Access: bootargs.Access, Desired: bootargs.Line(b.Args),
			Restore: bootargs.RestoreAbsent, Label: "systemd-boot /" + bootargs.KernelCmdline}
		b.Status.State = v1alpha1.BootStaged
	case !missing:
		b.Status.State = v1alpha1.BootBooted
	case policy == v1alpha1.BootReboot && backend.Kind == bootargs.KindUnsupported:
		b.Status.State, b.Status.Message = v1alpha1.BootUnsupported, backend.Reason
	case policy == v1alpha1.BootReboot:
		b.Status.State = v1alpha1.BootUnsupported
		b.Status.Message = fmt.Sprintf("%s (missing: %s)", backend.Reason, strings.Join(booted.Missing, " "))
	default:
		b.Status.State = v1alpha1.BootPlanned
		b.Status.Message = "policy ReportOnly: add to the kernel command line and reboot: " + strings.Join(booted.Missing, " ")
		if backend.Kind == bootargs.KindUnsupported {
			b.Status.Message += " (" + backend.Reason + ")"
		}
	}
	return b
}

func bootPolicy(p *v1alpha1.BootParametersSpec) (v1alpha1.BootPolicy, bootargs.Extras) {
	if p == nil {
		return v1alpha1.BootReportOnly, bootargs.Extras{}
	}
	x := bootargs.Extras{SkewTick: p.SkewTick == v1alpha1.Enabled, MaxCState: p.MaxCState}
	if p.Policy == v1alpha1.BootReboot {
		return v1alpha1.BootReboot, x
	}
	return v1alpha1.BootReportOnly, x
}

func failedPlan(err error) Boot {
	return Boot{Hold: true, Status: v1alpha1.BootStatus{State: v1alpha1.BootFailed, Message: err.Error()}}
}

// observedBoot is the status every state shares: the plan with what the
// running kernel holds, the backend and the boot.
func observedBoot(backend bootargs.Backend, args []bootargs.Arg, booted bootargs.Booted) v1alpha1.BootStatus {
	present := sets.New(booted.Present...)
	st := v1alpha1.BootStatus{Backend: backend.Name, BootID: booted.BootID,
		KernelIsolated: booted.Isolated, KernelNohzFull: booted.NohzFull}
	for _, a := range args {
		st.Arguments = append(st.Arguments, v1alpha1.BootArgument{Argument: a.String(), Why: a.Why, Present: present.Has(a.String())})
	}
	if !booted.BootedAt.IsZero() {
		st.BootedAt = timePtr(booted.BootedAt)
	}
	return st
}

// conflicting returns the wanted arguments that the running command line or
// another GRUB default file sets differently, not counting the agent's own
// staged arguments (now or before).
func conflicting(root *host.Root, cmdline string, backend bootargs.Backend, args []bootargs.Arg, ours []string) ([]bootargs.Conflict, error) {
	var own []bootargs.Arg
	for _, l := range ours {
		own = append(own, bootargs.Parse(l)...)
	}
	sources := [][2]string{{"/proc/cmdline", cmdline}}
	if backend.Kind == bootargs.KindGRUB {
		staged, err := bootargs.GRUB{Root: root}.Staged()
		if err != nil {
			return nil, err
		}
		own = append(own, staged...)
		more, err := bootargs.GRUBSources(root)
		if err != nil {
			return nil, err
		}
		sources = append(sources, more...)
	}
	if backend.Kind == bootargs.KindSystemdBoot {
		sb := bootargs.SystemdBoot{Root: root}
		staged, err := sb.Staged()
		if err != nil {
			return nil, err
		}
		own = append(own, staged...)
		more, err := sb.Sources()
		if err != nil {
			return nil, err
		}
		sources = append(sources, more...)
	}
	return bootargs.Conflicts(args, own, sources...), nil
}

func conflictMessage(cs []bootargs.Conflict, err error) string {
	if err != nil {
		return "nothing staged: " + err.Error()
	}
	return (&bootargs.ConflictError{Conflicts: cs}).Error()
}

// Settle is the boot status after the engine ran the plan's knob: Staged
// when the drop-in and grub.cfg hold the arguments and the running kernel
// lacks some, Booted when it holds them all, Failed with the engine's
// message otherwise. results are the engine's results this pass.
func (b Boot) Settle(root *host.Root, results []v1alpha1.SettingResult) v1alpha1.BootStatus {
	st := *b.Status.DeepCopy()
	if b.Knob == nil {
		return st
	}
	var res *v1alpha1.SettingResult
	for i := range results {
		if results[i].Setting == b.Knob.ID {
			res = &results[i]
		}
	}
	switch {
	case res == nil:
		st.State, st.Message = v1alpha1.BootFailed, "the staging setting "+b.Knob.ID+" was not applied this pass"
	case res.State != v1alpha1.SettingApplied:
		st.State, st.Message = v1alpha1.BootFailed, fmt.Sprintf("staging failed (%s): %s", res.State, res.Message)
	default:
		st.State, st.Message = settledState(root, b.Knob.ID, b.Args, st.Arguments)
	}
	if m := bootargs.Mismatch(root); m != "" {
		st.Message = strings.TrimPrefix(st.Message+"; "+m, "; ")
	}
	return st
}

func settledState(root *host.Root, id string, args []bootargs.Arg, plan []v1alpha1.BootArgument) (v1alpha1.BootState, string) {
	var missing []string
	for _, a := range plan {
		if !a.Present {
			missing = append(missing, a.Argument)
		}
	}
	where := "/" + bootargs.DropIn
	if id == bootargs.SettingSystemdBoot {
		where = "/" + bootargs.KernelCmdline
		if holds, known := bootargs.EntriesHold(root, args); known && !holds {
			return v1alpha1.BootFailed, fmt.Sprintf("%s holds the arguments but no systemd-boot entry of the running kernel does: kernel-install did not take them", where)
		}
	} else if holds, known := bootargs.Generated(root, args); known && !holds {
		return v1alpha1.BootFailed, fmt.Sprintf("/%s holds the arguments but /%s does not: update-grub did not take them", bootargs.DropIn, bootargs.GRUBCfg)
	}
	if len(missing) == 0 {
		return v1alpha1.BootBooted, "the running kernel holds every argument"
	}
	return v1alpha1.BootStaged, "staged in " + where + "; a reboot takes: " + strings.Join(missing, " ")
}

// SettingID is the setting that stages the plan on this node's backend
// (the GRUB drop-in's when the backend stages none).
func (b Boot) SettingID() string {
	if b.Knob != nil {
		return b.Knob.ID
	}
	if b.Status.Backend == "SystemdBoot" {
		return bootargs.SettingSystemdBoot
	}
	return bootargs.SettingGRUB
}

func timePtr(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}
