// Package bootargs covers what only the kernel command line isolates: the
// scheduler tick (nohz_full), RCU callbacks (rcu_nocbs), managed IRQs
// (isolcpus=managed_irq) and the default IRQ affinity (irqaffinity). It
// derives the arguments a node needs from that node's own CPUs, finds how
// the node's bootloader takes arguments, refuses arguments someone else set
// differently, renders and parses the bootloader drop-in, and checks after a
// boot what the kernel made of them.
//
// Every value it renders is built from a parsed CPU list or a typed extra,
// never from a string a profile or a file supplied, so nothing reaching a
// bootloader configuration (a shell fragment, for GRUB) is free-form.
package bootargs

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"
)

// Arg is one kernel argument: key=value, or a bare key when Value is "".
type Arg struct {
	Key, Value string
	// Why says what the argument isolates (for the plan a person reads).
	Why string
}

func (a Arg) String() string {
	if a.Value == "" {
		return a.Key
	}
	return a.Key + "=" + a.Value
}

// Extras are the typed arguments a profile may add to those derived from
// its CPUs.
type Extras struct {
	// SkewTick offsets the CPUs' ticks from one another (skew_tick=1), so
	// they do not all take the jiffies lock at once.
	SkewTick bool
	// MaxCState, when set, limits the deepest idle state
	// (processor.max_cstate and intel_idle.max_cstate): lower wake-up
	// latency for more power.
	MaxCState *int32
}

// maxCState bounds Extras.MaxCState (C-state numbers are small).
const maxCState = 9

// Derive returns the arguments a node with these CPUs needs for the
// isolated CPUs (none when isolated is empty), in a fixed order. reserved
// are the housekeeping CPUs: they take the tick, RCU callbacks and IRQs the
// isolated CPUs give up, so they must be online, non-empty and apart from
// isolated. Errors name the field.
func Derive(online, reserved, isolated cpuset.CPUSet, x Extras) ([]Arg, error) {
	if isolated.IsEmpty() {
		if x.SkewTick || x.MaxCState != nil {
			return extras(nil, x)
		}
		return nil, nil
	}
	switch {
	case !isolated.IsSubsetOf(online):
		return nil, fmt.Errorf("cpus.isolated %s: CPUs %s are not online on this node (online %s)",
			isolated, isolated.Difference(online), online)
	case reserved.IsEmpty():
		return nil, fmt.Errorf("cpus.reserved: required with cpus.isolated for boot arguments (the housekeeping CPUs take the tick, RCU callbacks and IRQs)")
	case !reserved.IsSubsetOf(online):
		return nil, fmt.Errorf("cpus.reserved %s: CPUs %s are not online on this node (online %s)",
			reserved, reserved.Difference(online), online)
	case !reserved.Intersection(isolated).IsEmpty():
		return nil, fmt.Errorf("cpus.reserved %s and cpus.isolated %s overlap on %s", reserved, isolated, reserved.Intersection(isolated))
	}
	iso := isolated.String()
	args := []Arg{
		{Key: "nohz_full", Value: iso, Why: "no scheduler tick on the isolated CPUs while they run one task"},
		{Key: "rcu_nocbs", Value: iso, Why: "RCU callbacks of the isolated CPUs run on the housekeeping CPUs"},
		{Key: "isolcpus", Value: "managed_irq," + iso, Why: "managed (driver-allocated) IRQs avoid the isolated CPUs"},
		{Key: "irqaffinity", Value: reserved.String(), Why: "IRQs start on the housekeeping CPUs"},
	}
	return extras(args, x)
}

func extras(args []Arg, x Extras) ([]Arg, error) {
	if x.SkewTick {
		args = append(args, Arg{Key: "skew_tick", Value: "1", Why: "CPUs' ticks offset from one another"})
	}
	if c := x.MaxCState; c != nil {
		if *c < 0 || *c > maxCState {
			return nil, fmt.Errorf("boot.maxCState %d: want 0 to %d", *c, maxCState)
		}
		v := fmt.Sprint(*c)
		args = append(args,
			Arg{Key: "processor.max_cstate", Value: v, Why: "idle no deeper than C" + v + " (ACPI idle)"},
			Arg{Key: "intel_idle.max_cstate", Value: v, Why: "idle no deeper than C" + v + " (intel_idle)"})
	}
	return args, nil
}

// safeValue is what a rendered value may contain: CPU lists, numbers and
// isolcpus flags. Render refuses anything else, so a value can never carry
// quotes, spaces, `$` or a newline into a shell fragment.
var safeValue = regexp.MustCompile(`^[a-z0-9_,.-]*$`)

// safeKey is a kernel parameter name.
var safeKey = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)

func check(args []Arg) error {
	for _, a := range args {
		if !safeKey.MatchString(a.Key) || !safeValue.MatchString(a.Value) {
			return fmt.Errorf("kernel argument %q: not a parameter name and value this agent renders", a.String())
		}
	}
	return nil
}

// Line is the arguments as one command-line fragment.
func Line(args []Arg) string {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = a.String()
	}
	return strings.Join(parts, " ")
}

// Parse splits a kernel command line (or GRUB_CMDLINE_LINUX value) into
// arguments, honouring double quotes (key="a b") and stopping at "--",
// after which the arguments belong to init.
func Parse(cmdline string) []Arg {
	var out []Arg
	for _, f := range fields(cmdline) {
		if f == "--" {
			break
		}
		k, v, _ := strings.Cut(f, "=")
		out = append(out, Arg{Key: k, Value: strings.Trim(v, `"`)})
	}
	return out
}

// fields splits on whitespace outside double quotes.
func fields(s string) []string {
	var out []string
	var b strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			b.WriteRune(r)
		case !quoted && (r == ' ' || r == '\t' || r == '\n'):
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
		default:
			b.WriteRune(r)
		}
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// Conflict is an argument someone else set to another value.
type Conflict struct {
	Key, Have, Want string
	// Source names where Have was found (/proc/cmdline, a GRUB file).
	Source string
}

func (c Conflict) String() string {
	return fmt.Sprintf("%s=%s in %s, not %s=%s", c.Key, c.Have, c.Source, c.Key, c.Want)
}

// Conflicts returns the wanted arguments that a source already sets to a
// different value. ours are the arguments this agent staged before (its
// journal): the running command line holding one of those is our own
// earlier revision, not someone else's. Sources are checked in the order
// given (name, text), the kernel's last-wins rule aside: any different
// value is reported, because the kernel and the bootloader disagree on
// which one wins across the places they concatenate.
func Conflicts(want, ours []Arg, sources ...[2]string) []Conflict {
	var out []Conflict
	for _, w := range want {
		for _, src := range sources {
			for _, have := range Parse(src[1]) {
				if have.Key != w.Key || have.Value == w.Value || slices.Contains(bare(ours), Arg{Key: have.Key, Value: have.Value}) {
					continue
				}
				out = append(out, Conflict{Key: w.Key, Have: have.Value, Want: w.Value, Source: src[0]})
			}
		}
	}
	return out
}

// bare strips the Why of each argument (what the journal and comparisons keep).
func bare(args []Arg) []Arg {
	out := make([]Arg, len(args))
	for i, a := range args {
		out[i] = Arg{Key: a.Key, Value: a.Value}
	}
	return out
}
