// Package featuregate is the one list of latencytier's feature gates
// (experimental behaviour, off unless a flag names it) and the parser of
// the --feature-gates flag the manager and the agent take: a comma
// separated list of Name=true|false, as Kubernetes components spell it.
// An unknown gate or a value other than true or false is an error naming
// the gate and the known ones, so a typo does not silently leave a gate
// off. It imports nothing of the project.
package featuregate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Flag is the name of the flag that sets the gates.
const Flag = "feature-gates"

// Gate names one feature gate.
type Gate string

// The gates.
const (
	// TierScheduler lets a LatencyProfile ask for spec.scheduler.class
	// Tier: latencytier's own sched_ext scheduler (experimental,
	// docs/sched_ext.md). Off, the manager writes no node the class and
	// says so on the profile.
	TierScheduler Gate = "TierScheduler"
)

// Known lists every gate, each off by default, in the order help shows them.
var Known = []Gate{TierScheduler}

// Gates is which gates are on; the zero value has every gate off.
type Gates struct {
	on map[Gate]bool
}

// Enabled reports whether gate g is on.
func (g Gates) Enabled(x Gate) bool { return g.on[x] }

// With is g with gate x set to on (for tests and wiring).
func (g Gates) With(x Gate, on bool) Gates {
	out := Gates{on: map[Gate]bool{}}
	for k, v := range g.on {
		out.on[k] = v
	}
	out.on[x] = on
	return out
}

// Parse reads a --feature-gates value: "Name=true,Other=false"; empty is
// every gate off. Each gate may appear once. Its errors name the gate, not
// the flag: the flag package wraps them with the flag's name.
func Parse(s string) (Gates, error) {
	g := Gates{on: map[Gate]bool{}}
	seen := map[Gate]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		gate := Gate(strings.TrimSpace(name))
		if !ok {
			return Gates{}, fmt.Errorf("%q is not Name=true or Name=false (known gates: %s)", item, known())
		}
		if !slices.Contains(Known, gate) {
			return Gates{}, fmt.Errorf("unknown feature gate %q (known gates: %s)", gate, known())
		}
		if seen[gate] {
			return Gates{}, fmt.Errorf("feature gate %s is given twice", gate)
		}
		on, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return Gates{}, fmt.Errorf("feature gate %s=%q: the value must be true or false", gate, value)
		}
		seen[gate], g.on[gate] = true, on
	}
	return g, nil
}

// String is g as --feature-gates spells it, the gates that are on only,
// in Known's order.
func (g Gates) String() string {
	var on []string
	for _, x := range Known {
		if g.on[x] {
			on = append(on, string(x)+"=true")
		}
	}
	return strings.Join(on, ",")
}

func known() string {
	names := make([]string, len(Known))
	for i, x := range Known {
		names[i] = string(x)
	}
	return strings.Join(names, ", ")
}

// Value is a flag.Value (and pflag.Value) over *Gates: fs.Var(featuregate.Value{&g}, featuregate.Flag, featuregate.Usage).
type Value struct{ Gates *Gates }

// Set parses s into the gates (the flag given twice: the last wins).
func (v Value) Set(s string) error {
	g, err := Parse(s)
	if err != nil {
		return err
	}
	*v.Gates = g
	return nil
}

// String is the gates that are on.
func (v Value) String() string {
	if v.Gates == nil {
		return ""
	}
	return v.Gates.String()
}

// Type names the value in pflag's help.
func (Value) Type() string { return "Name=bool,..." }

// Usage is the flag's help text.
func Usage() string {
	return "experimental features to turn on, as Name=true (comma separated; every gate is off by default). Known gates: " + known()
}
