package apply

import (
	"errors"
	"os"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/bootargs/bootargstest"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

const stagedLine = "nohz_full=2-3 rcu_nocbs=2-3 isolcpus=managed_irq,2-3 irqaffinity=0-1"

func grubKnob() knob.Knob {
	return knob.Knob{ID: bootargs.SettingGRUB, Path: bootargs.GRUBPath("trading"), Desired: stagedLine, Restore: bootargs.RestoreAbsent}
}

// grubHost is a temp root with Debian's GRUB files, an update-grub stand-in
// and the grub.cfg it generates from them (the baseline).
func grubHost(t *testing.T) (*host.Root, *bootargstest.UpdateGRUB, *Engine, string) {
	t.Helper()
	root := testroot.New(t, bootargstest.Files("quiet"))
	u := &bootargstest.UpdateGRUB{Root: root}
	if err := u.Run(t.Context(), "baseline", nil); err != nil {
		t.Fatal(err)
	}
	e := engine(root)
	e.HostTool = u.Run
	return root, u, e, testroot.Read(t, root.Path(bootargs.GRUBCfg))
}

func newBoot(t *testing.T, root *host.Root, id string) {
	t.Helper()
	testroot.Write(t, root.Proc("sys", "kernel", "random", "boot_id"), id+"\n")
}

// TestGRUBKnobSurvivesReboot stages through Apply, reboots (a new boot id:
// every kernel value's journal entry is moot), then the profile drops the
// arguments (policy ReportOnly: no knob): the drop-in is removed and
// grub.cfg is byte for byte the baseline. Before the drop-in's entry
// outlived the boot, the journal was discarded and the drop-in stayed.
func TestGRUBKnobSurvivesReboot(t *testing.T) {
	root, u, e, baseline := grubHost(t)
	rep, err := e.Apply(Meta{Profile: "trading"}, append(fakeKnobsOn(t, root), grubKnob()))
	if err != nil || state(t, rep.Results, bootargs.SettingGRUB).State != v1alpha1.SettingApplied {
		t.Fatalf("stage: %v %+v", err, rep.Results)
	}
	if got := testroot.Read(t, root.Path(bootargs.GRUBCfg)); got == baseline || !contains(got, "quiet "+stagedLine) {
		t.Fatalf("grub.cfg after stage:\n%s", got)
	}
	if rep, _ := e.Apply(Meta{Profile: "trading"}, append(fakeKnobsOn(t, root), grubKnob())); rep.Written != 0 || u.Count() != 2 {
		t.Fatalf("restage wrote %d, update-grub ran %d times (want 2: baseline, stage)", rep.Written, u.Count())
	}
	newBoot(t, root, "22222222-0000-0000-0000-000000000000")
	rep, err = e.Apply(Meta{Profile: "trading"}, fakeKnobsOn(t, root))
	if err != nil {
		t.Fatal(err)
	}
	if root.Exists(root.Path(bootargs.DropIn)) {
		t.Fatalf("drop-in left after the profile dropped it across a reboot: %+v", rep.Restored)
	}
	if got := testroot.Read(t, root.Path(bootargs.GRUBCfg)); got != baseline {
		t.Errorf("grub.cfg not restored byte for byte:\n%s\nwant\n%s", got, baseline)
	}
	if root.Exists(root.Path("var/lib/latencytier", bootargs.GRUBCfgOriginal)) || bootargs.Mismatch(root) != "" {
		t.Error("the grub.cfg copy is left after an exact revert")
	}
}

// TestGRUBKnobRevertAfterReboot: action Revert after a reboot removes the
// drop-in (the journal of the earlier boot is not simply dropped).
func TestGRUBKnobRevertAfterReboot(t *testing.T) {
	root, u, e, baseline := grubHost(t)
	if _, err := e.Apply(Meta{Profile: "trading"}, []knob.Knob{grubKnob()}); err != nil {
		t.Fatal(err)
	}
	newBoot(t, root, "33333333-0000-0000-0000-000000000000")
	rep, err := e.Revert()
	if err != nil || state(t, rep.Results, bootargs.SettingGRUB).State != v1alpha1.SettingReverted {
		t.Fatalf("revert: %v %+v", err, rep.Results)
	}
	if root.Exists(root.Path(bootargs.DropIn)) || testroot.Read(t, root.Path(bootargs.GRUBCfg)) != baseline || u.Count() != 3 {
		t.Errorf("after revert: drop-in %v, grub.cfg restored %v, update-grub runs %d", root.Exists(root.Path(bootargs.DropIn)),
			testroot.Read(t, root.Path(bootargs.GRUBCfg)) == baseline, u.Count())
	}
	if root.Exists(root.Path("var/lib/latencytier/journal.json")) {
		t.Error("journal left after a complete revert")
	}
}

// A failed update-grub leaves no drop-in behind and the next pass stages
// again; a grub.cfg that regenerates differently is reported, not hidden.
func TestGRUBKnobUpdateFailsThenMismatch(t *testing.T) {
	root, u, e, _ := grubHost(t)
	u.Fail = errors.New("exit status 1")
	rep, _ := e.Apply(Meta{Profile: "trading"}, []knob.Knob{grubKnob()})
	if r := state(t, rep.Results, bootargs.SettingGRUB); r.State != v1alpha1.SettingFailed || root.Exists(root.Path(bootargs.DropIn)) {
		t.Fatalf("failed update-grub: %+v, drop-in %v", r, root.Exists(root.Path(bootargs.DropIn)))
	}
	u.Fail = nil
	rep, _ = e.Apply(Meta{Profile: "trading"}, []knob.Knob{grubKnob()})
	if r := state(t, rep.Results, bootargs.SettingGRUB); r.State != v1alpha1.SettingApplied {
		t.Fatalf("retry: %+v", r)
	}
	// A kernel is installed meanwhile: the distribution's own file changes.
	testroot.Write(t, root.Path("etc/default/grub"), "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash\"\n")
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if root.Exists(root.Path(bootargs.DropIn)) || !contains(bootargs.Mismatch(root), "differs from before staging") {
		t.Errorf("drop-in %v, mismatch %q", root.Exists(root.Path(bootargs.DropIn)), bootargs.Mismatch(root))
	}
}

func fakeKnobsOn(t *testing.T, root *host.Root) []knob.Knob {
	t.Helper()
	if !root.Exists(root.Proc("sys", "a")) {
		testroot.Write(t, root.Proc("sys", "a"), "1\n")
		testroot.Write(t, root.Proc("sys", "b"), "5\n")
	}
	return fakeKnobs(root)
}

func contains(s, sub string) bool { return sub != "" && strings.Contains(s, sub) }

// A pass that holds the boot scope (someone else's conflicting argument
// appeared, or the plan could not be worked out) writes nothing: the
// staged drop-in stays, update-grub does not run.
func TestGRUBKnobHeldOnConflict(t *testing.T) {
	root, u, e, _ := grubHost(t)
	if _, err := e.Apply(Meta{Profile: "trading"}, []knob.Knob{grubKnob()}); err != nil {
		t.Fatal(err)
	}
	staged := testroot.Read(t, root.Path(bootargs.DropIn))
	rep, err := e.Apply(Meta{Profile: "trading", Undetermined: []string{"boot"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if testroot.Read(t, root.Path(bootargs.DropIn)) != staged || u.Count() != 2 || len(rep.Held) != 1 {
		t.Errorf("held pass: drop-in changed %v, update-grub runs %d, held %+v", testroot.Read(t, root.Path(bootargs.DropIn)) != staged, u.Count(), rep.Held)
	}
}

// TestSystemdBootKnobRevertAfterReboot: the systemd-boot knob stages
// through Apply, its journal entry outlives a reboot, and Revert after the
// boot writes /etc/kernel/cmdline back byte for byte and runs
// kernel-install again.
func TestSystemdBootKnobRevertAfterReboot(t *testing.T) {
	orig := "root=UUID=1234 ro quiet\n"
	root := testroot.New(t, bootargstest.SystemdBootFiles(orig))
	if err := bootargstest.MakeKernelInstallExecutable(root); err != nil {
		t.Fatal(err)
	}
	ki := &bootargstest.KernelInstall{Root: root}
	e := engine(root)
	e.HostTool = ki.Run
	k := knob.Knob{ID: bootargs.SettingSystemdBoot, Path: bootargs.SystemdBootPath("trading"), Desired: stagedLine, Restore: bootargs.RestoreAbsent}
	rep, err := e.Apply(Meta{Profile: "trading"}, []knob.Knob{k})
	if err != nil || state(t, rep.Results, bootargs.SettingSystemdBoot).State != v1alpha1.SettingApplied {
		t.Fatalf("stage: %v %+v", err, rep.Results)
	}
	if got := testroot.Read(t, root.Path(bootargs.KernelCmdline)); got != "root=UUID=1234 ro quiet "+stagedLine || ki.Count() != 1 {
		t.Fatalf("/etc/kernel/cmdline %q, kernel-install runs %d", got, ki.Count())
	}
	newBoot(t, root, "44444444-0000-0000-0000-000000000000")
	rep, err = e.Revert()
	if err != nil || state(t, rep.Results, bootargs.SettingSystemdBoot).State != v1alpha1.SettingReverted {
		t.Fatalf("revert: %v %+v", err, rep.Results)
	}
	b, err := os.ReadFile(root.Path(bootargs.KernelCmdline))
	if err != nil || string(b) != orig || ki.Count() != 2 {
		t.Errorf("after revert: %q (%v), kernel-install runs %d; want %q and 2", b, err, ki.Count(), orig)
	}
	if root.Exists(root.Path("var/lib/latencytier/journal.json")) || root.Exists(root.Path("var/lib/latencytier", bootargs.KernelCmdlineOriginal)) {
		t.Error("journal or kept original left after a complete revert")
	}
}
