package tiersched

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/schedext"
	tbpf "latencytier.io/latencytier/agent/tiersched/bpf"
	"latencytier.io/latencytier/internal/knobs"
)

// The scheduler/class knob: its ID (internal/knobs' table), its address and
// its two values.
var SettingID = knobs.SchedulerClassID

const (
	// Address is the knob's Path; the Access claims it.
	Address = "schedext:class"
	// Fair is the value without a sched_ext scheduler: the journaled
	// original.
	Fair = schedext.ClassFair
	// Tier is the value with this agent's scheduler attached.
	Tier = schedext.ClassExt + ":" + tbpf.OpsName
)

// Access is the knob kind "schedext" (never renamed: journals name it).
// Read says which class normal tasks run in; Write Tier loads, attaches,
// pins and verifies the tier scheduler; Write Fair detaches this agent's
// pinned instance and nothing else. A foreign scheduler is never touched.
// The pins vanish with a reboot, and so does the value: not
// SurvivesReboot.
var Access = &knob.Access{
	Name:   "schedext",
	Read:   func(env knob.Env, _ string) (string, error) { return Read(env.Root) },
	Write:  func(env knob.Env, _, value string) error { return Write(env.Root, value, tbpf.Options{}) },
	Claims: func(addr string) bool { return addr == Address },
}

// Knob is the scheduler/class knob asking for value (Tier or Fair).
func Knob(value string) knob.Knob {
	return knob.Knob{ID: SettingID, Path: Address, Access: Access, Desired: value, Label: "scheduler class"}
}

// Read is the node's class as the knob sees it: Fair; Tier while this
// agent's pinned scheduler is attached and enabled; otherwise what
// /sys/kernel/sched_ext says, marked when it is not ours.
func Read(root *host.Root) (string, error) {
	st := schedext.Read(root)
	if st.Problem != "" {
		return "", fmt.Errorf("/sys/kernel/sched_ext: %s", st.Problem)
	}
	if st.Class() == schedext.ClassFair {
		return Fair, nil
	}
	if st.Ops == tbpf.OpsName && st.State == schedext.StateEnabled && tbpf.Pinned(PinDir(root)) {
		return Tier, nil
	}
	if st.Ops == tbpf.OpsName {
		return st.String() + " (not loaded by this agent)", nil
	}
	return st.String(), nil
}

// Write makes the class value: Tier or Fair, nothing else.
func Write(root *host.Root, value string, o tbpf.Options) error {
	switch strings.TrimSpace(value) {
	case Tier:
		return load(root, o)
	case Fair:
		return unload(root)
	}
	if cur, err := Read(root); err == nil && cur == strings.TrimSpace(value) {
		return nil // a revert restoring a foreign scheduler's class that is still there
	}
	return kerr.Classify("write", Address, fmt.Errorf("scheduler class %q: want %q or %q: %w", value, Fair, Tier, syscall.EINVAL))
}

// verifyWait bounds how long an attach may take to show as enabled.
const verifyWait = 2 * time.Second

func load(root *host.Root, o tbpf.Options) error {
	if ex, err := ReadExit(root); err != nil {
		return err
	} else if ex != nil {
		return &Refused{Class: kerr.Failed, Reason: "not reloaded after the kernel ejected it: " + ex.Message()}
	}
	n := ReadNode(root)
	if n.Ours {
		return nil
	}
	if tbpf.Pinned(PinDir(root)) {
		// Pinned but not running: the kernel ejected it and the watcher
		// has not recorded it yet; it will, and the setting then reports
		// Fallback.
		return &Refused{Class: kerr.Failed, Reason: fmt.Sprintf("the kernel ejected the tier scheduler (it shows %s); not reloaded", n.SchedExt)}
	}
	if r := Preflight(n); r != nil {
		return r
	}
	s, err := tbpf.Load(o)
	if err != nil {
		return loadRefusal(n, err)
	}
	if err := s.Attach(); err != nil {
		s.Close()
		return attachRefusal(n, err)
	}
	if err := verify(root, n.SchedExt, s.Maps()); err != nil {
		_ = s.Detach()
		return err
	}
	if err := s.Pin(PinDir(root)); err != nil {
		_ = s.Detach()
		_ = tbpf.Unpin(PinDir(root))
		return fmt.Errorf("pin the tier scheduler under %s: %w", PinDir(root), err)
	}
	return s.Close() // the pins hold it now
}

// verify waits until the kernel shows the scheduler enabled under our name
// with a new enable_seq: the kernel's enable path reports most failures
// as success and disables the scheduler right after (scx_enable's
// err_disable), so a successful attach proves nothing by itself.
func verify(root *host.Root, before schedext.State, m *tbpf.Maps) error {
	deadline := time.Now().Add(verifyWait)
	for {
		st := schedext.Read(root)
		seqMoved := before.EnableSeq < 0 || st.EnableSeq > before.EnableSeq
		if st.State == schedext.StateEnabled && st.Ops == tbpf.OpsName && seqMoved && st.SwitchAll {
			return nil
		}
		if ex, err := m.Exit(); err == nil && ex.Kind != 0 {
			return fmt.Errorf("the kernel disabled the tier scheduler right after enabling it: %s", exitMessage(ex))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the tier scheduler attached but the kernel shows %s (enable_seq %d → %d, switch_all %v) after %s", st, before.EnableSeq, st.EnableSeq, st.SwitchAll, verifyWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// loadRefusal turns a load error into a refusal where the cause is the
// kernel's lack of something.
func loadRefusal(n Node, err error) error {
	if errors.Is(err, ebpf.ErrNotSupported) {
		return unsupported("this kernel (%s) cannot load the tier scheduler: %v", release(n), err)
	}
	return fmt.Errorf("load the tier scheduler: %w", err)
}

// attachRefusal names the kernel's reasons for an attach refusal: EINVAL
// is what sched_ext returns for domain isolation (isolcpus=, or on 7.0 an
// isolated partition made after the preflight), EBUSY another scheduler
// that won the race.
func attachRefusal(n Node, err error) error {
	switch {
	case errors.Is(err, syscall.EBUSY):
		return &Refused{Class: kerr.Conflict, Reason: fmt.Sprintf("another sched_ext scheduler was loaded meanwhile (the kernel says busy: %v); latencytier never unloads it", err)}
	case errors.Is(err, syscall.EINVAL):
		return &Refused{Class: kerr.Invalid, Reason: fmt.Sprintf("the kernel refused to enable the tier scheduler (%v): on %s that is domain isolation (isolcpus=, or an isolated cpuset partition on 7.0); the kernel log says which", err, release(n))}
	}
	return fmt.Errorf("attach the tier scheduler: %w", err)
}

// unload detaches this agent's pinned scheduler and checks the kernel is
// back to the fair class. Another scheduler is left alone, and said so.
func unload(root *host.Root) error {
	dir := PinDir(root)
	st := schedext.Read(root)
	if !tbpf.Pinned(dir) {
		if st.Class() != schedext.ClassFair {
			return &Refused{Class: kerr.Conflict, Reason: fmt.Sprintf("another sched_ext scheduler is loaded (%s); latencytier never unloads a scheduler it did not load", st)}
		}
		return tbpf.Unpin(dir) // leftover map pins, if any
	}
	if err := tbpf.Unpin(dir); err != nil {
		return fmt.Errorf("detach the tier scheduler: %w", err)
	}
	deadline := time.Now().Add(verifyWait)
	for {
		st = schedext.Read(root)
		if st.Class() == schedext.ClassFair {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("detached the tier scheduler but the kernel still shows %s after %s", st, verifyWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
