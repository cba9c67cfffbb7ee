package knobs

import (
	"slices"
	"strings"
)

// Class is what admission and the agent do with a raw sysctl.
type Class string

// The classes of raw sysctls; every name is in exactly one.
const (
	// ClassTyped: a typed field of spec.scheduler owns the file; refused as
	// a raw sysctl (set the field).
	ClassTyped Class = "Typed"
	// ClassAllowed: on the built-in allowlist, accepted without an unlock.
	ClassAllowed Class = "Allowed"
	// ClassUnlockable: accepted only when the cluster admin lists it in
	// the AdminConfigMap.
	ClassUnlockable Class = "Unlockable"
	// ClassRefused: refused whatever the admin lists (Refusal says why).
	ClassRefused Class = "Refused"
)

// Classes lists every class in the order docs/knobs.md counts them.
var Classes = []Class{ClassTyped, ClassAllowed, ClassUnlockable, ClassRefused}

// Classify says which class raw sysctl name is in.
func Classify(name string) Class {
	if _, typed := TypedBy(name); typed {
		return ClassTyped
	}
	r, ok := lookup(name)
	switch {
	case ok && r.Refused != "":
		return ClassRefused
	case ok && r.Allowed && !r.Prefix && r.Name == name:
		return ClassAllowed
	}
	return ClassUnlockable
}

// Allowed are the names on the built-in allowlist, sorted.
func Allowed() []string {
	var out []string
	for _, r := range rules {
		if r.Allowed {
			out = append(out, r.Name)
		}
	}
	slices.Sort(out)
	return out
}

// The cluster admin's unlock: a ConfigMap in the operator's namespace that
// only the admin may write (neither the manager's nor the agent's role
// grants configmap writes), read by the allowlist admission policy
// (config/admission) as its parameter and by the agent from a volume.
const (
	AdminConfigMap = "latencytier-sysctls"
	AdminKey       = "allowedSysctls"
)

// AdminList is the admin's unlock: exact names, and prefixes ending in "."
// (every name under it) or "*" (every name starting with what precedes
// it). Entries are separated by commas or newlines; surrounding whitespace
// is dropped; a lone "*" or "." unlocks nothing. The admission policy's CEL
// (adminCEL) reads the same text the same way.
type AdminList []string

// ParseAdminList reads the ConfigMap value.
func ParseAdminList(s string) AdminList {
	var out AdminList
	for _, e := range strings.Split(strings.ReplaceAll(s, "\n", ","), ",") {
		if e = strings.TrimSpace(e); len(e) > 1 {
			out = append(out, e)
		}
	}
	return out
}

// Unlocks says whether an entry of the list covers name.
func (a AdminList) Unlocks(name string) bool {
	for _, e := range a {
		switch {
		case e == name,
			strings.HasSuffix(e, "*") && strings.HasPrefix(name, strings.TrimSuffix(e, "*")),
			strings.HasSuffix(e, ".") && strings.HasPrefix(name, e):
			return true
		}
	}
	return false
}

// Accepts says whether raw sysctl name may be written with the admin's
// list, and if not, the message naming it and why. Typed and refused names
// are never accepted.
func Accepts(name string, admin AdminList) (string, bool) {
	if s, typed := TypedBy(name); typed {
		return "sysctl " + name + " is already the typed field scheduler." + s.Field + " (setting " + s.ID() + "); set it there", false
	}
	if msg, refused := Refusal(name); refused {
		return msg, false
	}
	if Classify(name) == ClassAllowed || admin.Unlocks(name) {
		return "", true
	}
	return "sysctl " + name + " " + notAllowedWhy, false
}

// notAllowedWhy follows "sysctl <name> " when a name is neither on the
// allowlist nor unlocked. No quote characters (it is embedded in CEL).
const notAllowedWhy = "is not on the built-in allowlist of latency sysctls (docs/knobs.md): the cluster admin may unlock it by adding it to key " +
	AdminKey + " of ConfigMap " + AdminConfigMap + " in the operator namespace"

// AllowlistPolicyName names the ValidatingAdmissionPolicy (and its binding)
// in config/admission that refuses, on LatencyProfile create and update, a
// raw sysctl neither on the allowlist nor in the admin's list.
const AllowlistPolicyName = "latencytier-sysctl-allowlist"

// CELVariable is one variable of an admission policy.
type CELVariable struct{ Name, Expression string }

// AllowlistPolicy are the variables and the one validation of the allowlist
// policy, derived from the catalogue; a test compares them with
// config/admission/policy.yaml. It checks names only: the values of
// allowlisted names are bounded by the CRD's CEL (ValueRules) and the agent
// (CheckValue), and the values of names the admin unlocks are only
// length-bounded (MaxValueChars, one line). On update, a name the old object already
// carries is not checked again: a name the admin later removes must not
// block the manager's finalizer patches (the agent on each node enforces
// the admin's current list and reverts what it no longer allows).
func AllowlistPolicy() (vars []CELVariable, expression, messageExpression string) {
	match := "e == s.name || (e.endsWith('*') && s.name.startsWith(e.substring(0, e.size() - 1))) || (e.endsWith('.') && s.name.startsWith(e))"
	vars = []CELVariable{
		{Name: "builtin", Expression: celList(Allowed())},
		{Name: "unlocked", Expression: "params.?data.?" + AdminKey + ".orValue('').replace('\\n', ',').split(',').map(e, e.trim()).filter(e, e.size() > 1)"},
		{Name: "refused", Expression: "object.spec.?sysctls.orValue([]).transformList(i, s, " +
			"!(s.name in variables.builtin) && " +
			"!(request.operation == 'UPDATE' && oldObject.?spec.?sysctls.orValue([]).exists(o, o.name == s.name)) && " +
			"!variables.unlocked.exists(e, " + match + "), " +
			"'spec.sysctls[' + string(i) + '].name: sysctl ' + s.name + ' " + notAllowedWhy + "')"},
	}
	return vars, "size(variables.refused) == 0", "variables.refused.join('; ')"
}
