package knobs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// ValueKind is the type of an allowlisted sysctl's value.
type ValueKind string

// The value types of allowlisted sysctls.
const (
	// KindInteger is a decimal integer between Min and Max (no sign, no
	// spaces: the kernel would also take "+5" or " 5", admission does not).
	KindInteger ValueKind = "Integer"
	// KindCPUList is a kernel cpulist ("0,2-4"): ascending ranges of CPUs
	// up to MaxCPU.
	KindCPUList ValueKind = "CPUList"
)

// MaxCPU is the highest CPU number a cpulist value may name: the kernel's
// CONFIG_NR_CPUS is at most 8192 (arch/x86/Kconfig NR_CPUS_RANGE_END).
const MaxCPU = 8191

// maxIntegerDigits bounds the digits CEL and the agent parse: every Max
// fits, and int64 cannot overflow.
const maxIntegerDigits = 15

// Bounds is the type and range of one allowlisted sysctl's value: what the
// CRD's CEL (ValueRules), the agent (CheckValue) and docs/knobs.md take.
type Bounds struct {
	Kind ValueKind
	// Min and Max bound a KindInteger value, inclusive.
	Min, Max int64
	// Unit names what the integer counts, for messages and docs ("" = a
	// plain number).
	Unit string
}

func integer(lo, hi int64, unit string) Bounds {
	return Bounds{Kind: KindInteger, Min: lo, Max: hi, Unit: unit}
}

// toggle is a 0/1 switch.
func toggle() Bounds { return integer(0, 1, "") }

func cpulist() Bounds { return Bounds{Kind: KindCPUList} }

// describe is the phrase that follows "must be " in messages and docs. It
// holds no quote characters (it is embedded in CEL string literals).
func (b Bounds) describe() string {
	switch b.Kind {
	case KindInteger:
		s := fmt.Sprintf("an integer from %d to %d", b.Min, b.Max)
		if b.Unit != "" {
			s += " (" + b.Unit + ")"
		}
		return s
	case KindCPUList:
		return fmt.Sprintf("a cpulist of ascending ranges of CPUs 0 to %d (0,2-4)", MaxCPU)
	}
	return "unset"
}

// valueWhy follows "sysctl <name> value <value> " in messages.
func (b Bounds) valueWhy() string { return "is out of bounds: it must be " + b.describe() }

// BoundsOf returns the bounds of an allowlisted sysctl; ok is false for
// every other name (the admin's unlocked names are only length-bounded).
func BoundsOf(name string) (Bounds, bool) {
	for _, r := range rules {
		if r.Allowed && !r.Prefix && r.Name == name {
			return r.Value, true
		}
	}
	return Bounds{}, false
}

var (
	digits      = regexp.MustCompile(`^[0-9]{1,` + strconv.Itoa(maxIntegerDigits) + `}$`)
	cpulistForm = regexp.MustCompile(cpulistPattern)
)

// cpulistPattern is the cpulist syntax, for Go and CEL alike (no
// backslashes, so it reads the same in a CEL string literal).
const cpulistPattern = `^[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?)*$`

// CheckValue says whether value is within the bounds of sysctl name, and
// if not the message naming the sysctl, the value and the bounds. Names
// without bounds (not on the allowlist) pass: their values are only
// length-bounded.
func CheckValue(name, value string) (string, bool) {
	b, ok := BoundsOf(name)
	if !ok || b.contains(value) {
		return "", true
	}
	return "sysctl " + name + " value " + value + " " + b.valueWhy(), false
}

func (b Bounds) contains(v string) bool {
	switch b.Kind {
	case KindInteger:
		if !digits.MatchString(v) {
			return false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && n >= b.Min && n <= b.Max
	case KindCPUList:
		if !cpulistForm.MatchString(v) {
			return false
		}
		for _, r := range strings.Split(v, ",") {
			lo, hi, _ := strings.Cut(r, "-")
			if hi == "" {
				hi = lo
			}
			l, _ := strconv.Atoi(lo)
			h, _ := strconv.Atoi(hi)
			if l > h || h > MaxCPU {
				return false
			}
		}
		return true
	}
	return false
}

// cel is the CEL condition on self.value that holds when it is in bounds.
func (b Bounds) cel() string {
	switch b.Kind {
	case KindInteger:
		return fmt.Sprintf("self.value.matches('%s') && int(self.value) >= %d && int(self.value) <= %d", digits.String(), b.Min, b.Max)
	case KindCPUList:
		last := "int(r.split('-')[r.split('-').size() - 1])"
		return fmt.Sprintf("self.value.matches('%s') && self.value.split(',').all(r, int(r.split('-')[0]) <= %s && %s <= %d)",
			cpulistPattern, last, last, MaxCPU)
	}
	return "false"
}

// ValueRules are the Sysctl type's value rules, one per allowlisted name:
// the value of that name must be within its bounds. Each reports at
// .value (spec.sysctls[i].value) and names the sysctl and the bounds.
func ValueRules() []CELRule {
	var out []CELRule
	for _, r := range rules {
		if !r.Allowed {
			continue
		}
		out = append(out, CELRule{
			Rule:              "self.name != '" + r.Name + "' || (" + r.Value.cel() + ")",
			MessageExpression: "'sysctl " + r.Name + " value ' + self.value + ' " + r.Value.valueWhy() + "'",
			FieldPath:         ".value",
		})
	}
	return out
}
