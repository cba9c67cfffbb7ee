// Package schedext reads which scheduling class the node's normal tasks run
// in: the fair class (CFS or EEVDF, the one every scheduler knob of ours
// tunes), or a sched_ext BPF scheduler someone loaded. It reads the kernel's
// sysfs interface, /sys/kernel/sched_ext (kernel/sched/ext.c, "Sysfs
// interface"; Linux 6.12+ with CONFIG_SCHED_CLASS_EXT):
//
//	state        enabling | enabled | disabling | disabled   (scx_enable_state_str)
//	switch_all   %d: 1 when every SCHED_NORMAL/BATCH/IDLE task is on ext
//	enable_seq   %ld: incremented each time a BPF scheduler is enabled
//	root/ops     %s: the attached scheduler's ops name; the root directory
//	             exists only while one is attached
//
// Every byte of it is untrusted (a foreign scheduler chooses its ops name):
// files are read bounded, numbers and states are parsed strictly, and the
// name is escaped and cut to the status bound. The package is a reader and
// pure comparisons (Changed); findings and verdicts decide what a class
// means.
package schedext

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/bound"
)

// The classes a node reports (KernelFacts.activeClass).
const (
	// ClassFair: normal tasks run in the fair class (CFS/EEVDF).
	ClassFair = "fair"
	// ClassExt: a sched_ext BPF scheduler is attached (enabling, enabled
	// or disabling).
	ClassExt = "ext"
	// ClassUnknown: the kernel has sched_ext but its state could not be
	// read or said something this package does not know.
	ClassUnknown = "unknown"
)

// The kernel's enable states (/sys/kernel/sched_ext/state).
const (
	StateEnabling  = "enabling"
	StateEnabled   = "enabled"
	StateDisabling = "disabling"
	StateDisabled  = "disabled"
)

var states = []string{StateEnabling, StateEnabled, StateDisabling, StateDisabled}

// OpsLen is the longest ops name reported, in characters after escaping
// (the status bound); the kernel's own limit is 127 bytes
// (SCX_OPS_NAME_LEN 128 with the NUL).
const OpsLen = bound.SchedExtOps

// maxFile is the most read of any sched_ext file: sysfs shows at most a
// page, and every file of ours is a word or a number.
const maxFile = 4096

// NotBuiltIn is SchedExtFacts.Note on a kernel without sched_ext.
const NotBuiltIn = "sched_ext is not built into this kernel (no /sys/kernel/sched_ext): normal tasks always run in the fair class"

// State is what /sys/kernel/sched_ext said at one moment.
type State struct {
	// Supported says the directory exists (CONFIG_SCHED_CLASS_EXT).
	Supported bool
	// State is the kernel's enable state, one of the four; "" when
	// unsupported or unreadable (Problem says why).
	State string
	// Ops is the attached scheduler's ops name, escaped and bounded; ""
	// when none is attached or it could not be read.
	Ops string
	// SwitchAll says every normal task is on ext (switch_all 1); false
	// with a scheduler attached is partial mode: only SCHED_EXT tasks.
	SwitchAll bool
	// EnableSeq is enable_seq, -1 when absent or unreadable.
	EnableSeq int64
	// Problem says what could not be read or parsed, escaped ("" when
	// everything read cleanly).
	Problem string
}

// Read reads the node's sched_ext state through root. When the scheduler
// comes or goes between the reads (state enabled but root/ops gone), it
// reads once more.
func Read(root *host.Root) State {
	s := read(root)
	if s.State == StateEnabled && s.Ops == "" && s.Problem == "" {
		s = read(root)
		if s.State == StateEnabled && s.Ops == "" && s.Problem == "" {
			s.Problem = "root/ops: absent while state is enabled"
		}
	}
	return s
}

func read(root *host.Root) State {
	dir := root.Sys("kernel", "sched_ext")
	s := State{EnableSeq: -1}
	if !root.IsDir(dir) {
		return s
	}
	s.Supported = true
	var problems []string
	note := func(file string, err error) { problems = append(problems, file+": "+err.Error()) }

	if v, err := word(dir, "state"); err != nil {
		note("state", err)
	} else if !slices.Contains(states, v) {
		note("state", fmt.Errorf("%q is not one of %s", v, strings.Join(states, ", ")))
	} else {
		s.State = v
	}
	if v, err := number(dir, "switch_all"); err != nil {
		note("switch_all", err)
	} else if v != 0 && v != 1 {
		note("switch_all", fmt.Errorf("%d is not 0 or 1", v))
	} else {
		s.SwitchAll = v == 1
	}
	if v, err := number(dir, "enable_seq"); err == nil {
		s.EnableSeq = v
	} else if !errors.Is(err, fs.ErrNotExist) {
		note("enable_seq", err)
	}
	if s.State != StateDisabled {
		switch v, err := readFile(dir, "root", "ops"); {
		case errors.Is(err, fs.ErrNotExist): // not attached (yet, or any more)
		case err != nil:
			note("root/ops", err)
		case strings.TrimSuffix(v, "\n") == "":
			note("root/ops", errors.New("empty"))
		default:
			s.Ops = bound.String(strings.TrimSuffix(v, "\n"), OpsLen)
		}
	}
	s.Problem = bound.String(strings.Join(problems, "; "), bound.SchedExtNote)
	return s
}

// Class is ClassFair, ClassExt or ClassUnknown.
func (s State) Class() string {
	switch {
	case !s.Supported || s.State == StateDisabled:
		return ClassFair
	case s.State == "":
		return ClassUnknown
	}
	return ClassExt
}

// Partial says an enabled scheduler takes only SCHED_EXT tasks: every
// other normal task stays in the fair class. (switch_all is set late in
// enabling and cleared early in disabling, so it is read only when enabled.)
func (s State) Partial() bool { return s.State == StateEnabled && !s.SwitchAll }

// String is the class in one word or phrase, as the summary column and the
// evidence carry it: "fair", "unknown", "ext:scx_lavd", with what is not
// the steady whole-node case after it: "ext:scx_lavd (partial)",
// "ext:scx_lavd (enabling)", "ext (disabling)" (no name left).
func (s State) String() string {
	if s.Class() != ClassExt {
		return s.Class()
	}
	out := ClassExt
	if s.Ops != "" {
		out += ":" + s.Ops
	}
	var notes []string
	if s.State != StateEnabled {
		notes = append(notes, s.State)
	}
	if s.Partial() {
		notes = append(notes, "partial")
	}
	if len(notes) > 0 {
		out += " (" + strings.Join(notes, ", ") + ")"
	}
	return out
}

// Changed says how the class moved from prev to cur: "" when it did not.
// A new enable_seq counts even when both ends read the same: a scheduler
// was loaded (and maybe unloaded) in between.
func Changed(prev, cur State) string {
	seq := ""
	if prev.EnableSeq >= 0 && cur.EnableSeq >= 0 && prev.EnableSeq != cur.EnableSeq {
		seq = fmt.Sprintf("enable_seq %d→%d", prev.EnableSeq, cur.EnableSeq)
	}
	from, to := prev.String(), cur.String()
	switch {
	case from != to && seq != "":
		return fmt.Sprintf("%s → %s (%s)", from, to, seq)
	case from != to:
		return fmt.Sprintf("%s → %s", from, to)
	case seq != "":
		return fmt.Sprintf("%s at both ends, but a sched_ext scheduler was loaded in between (%s)", to, seq)
	}
	return ""
}

// word reads a one-word file.
func word(dir, name string) (string, error) {
	v, err := readFile(dir, name)
	return strings.TrimSpace(v), err
}

// number reads a file holding one decimal number of at least 0.
func number(dir, name string) (int64, error) {
	v, err := word(dir, name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a count", bound.String(v, 32))
	}
	return n, nil
}

// readFile reads dir/elem..., at most maxFile bytes; a longer file is an
// error, not a cut value.
func readFile(dir string, elem ...string) (string, error) {
	f, err := os.Open(strings.Join(append([]string{dir}, elem...), "/"))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return "", pe.Err // the caller names the file
		}
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return "", errors.New("unreadable")
	}
	if len(b) > maxFile {
		return "", fmt.Errorf("longer than %d bytes", maxFile)
	}
	return string(b), nil
}
