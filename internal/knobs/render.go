package knobs

import (
	"fmt"
	"slices"
	"strings"
)

// CELRule is one x-kubernetes-validations entry of the API's Sysctl type.
type CELRule struct {
	Rule              string
	MessageExpression string
}

// Marker is the kubebuilder marker that generates the rule.
func (c CELRule) Marker() string {
	return "// +kubebuilder:validation:XValidation:rule=`" + c.Rule + "`,messageExpression=`" + c.MessageExpression + "`"
}

// CELRules are the Sysctl type's rules derived from the catalogue: one for
// the typed-field duplicates, one per refusal reason, one for the value.
// api/v1alpha1 tests that the generated CRDs hold exactly these.
func CELRules() []CELRule {
	var typed, fields []string
	for _, s := range SchedulerKnobs {
		for _, p := range s.Places {
			if n := p.Sysctl(); n != "" {
				typed = append(typed, n)
				fields = append(fields, fmt.Sprintf("'%s': '%s'", n, s.Field))
			}
		}
	}
	out := []CELRule{{
		Rule: "!(self.name in " + celList(typed) + ")",
		MessageExpression: "'sysctl ' + self.name + ' duplicates a typed field of spec.scheduler (' + {" +
			strings.Join(fields, ", ") + "}[self.name] + '); set it there'",
	}}
	for _, r := range reasons {
		names, prefixes := refusedFor(r)
		var terms []string
		if len(names) > 0 {
			terms = append(terms, "self.name in "+celList(names))
		}
		if len(prefixes) > 0 {
			terms = append(terms, celList(prefixes)+".exists(p, self.name.startsWith(p))")
		}
		out = append(out, CELRule{Rule: "!(" + strings.Join(terms, " || ") + ")",
			MessageExpression: "'sysctl ' + self.name + ' " + r.why() + "'"})
	}
	return append(out, CELRule{
		Rule:              `!self.value.contains('\n') && !self.value.contains('\x00')`,
		MessageExpression: "'sysctl ' + self.name + ' value holds a newline or NUL character: the kernel would take only the part before it'",
	})
}

func celList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "'" + x + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// markdown renders docs/knobs.md.
func markdown() string {
	var b strings.Builder
	b.WriteString("# Kernel knobs\n\n")
	b.WriteString("Generated from `internal/knobs` (`go test ./internal/knobs -update`); do not edit by hand.\n\n")
	b.WriteString("## Setting IDs\n\n")
	b.WriteString("Every result in `LatencyNode` `status.settings` and every journal entry is named by a setting ID:\n\n")
	b.WriteString("- `" + SchedulerID("<field>") + "` — a typed field of `spec.scheduler` (table below)\n")
	b.WriteString("- `" + SysctlID("<name>") + "` — a raw sysctl from `spec.sysctls`, e.g. `" + SysctlID("net.core.busy_poll") + "`\n")
	b.WriteString("- `irq/<number>`, `irq/default_smp_affinity` — IRQ affinity\n")
	b.WriteString("- `cpuset/<slice>` (`cpuset/system.slice`, …), `cpuset/cgroup.subtree_control`, `cpuset/pod/<namespace>/<pod>/…` — cpusets\n")
	b.WriteString("- `cpuquota/<namespace>/<pod>/…` — CFS quota of an opted-in pod and its containers\n")
	b.WriteString("- `" + PowerID("<N>", ResumeLatencyLeaf) + "`, `" + PowerID("<N>", IdleDisableLeaf("<K>")) + "`, `" + PowerID("<N>", GovernorLeaf) +
		"` — `spec.power` (section below); `" + PowerClassID("<class>", GovernorLeaf) + "` for a result about a whole class\n\n")
	b.WriteString("## Typed scheduler knobs\n\n")
	b.WriteString("The agent probes the places in order and uses the first that exists; the kernel versions say where each is expected.\n\n")
	b.WriteString("| field | setting ID | places (kernel versions) | EEVDF (6.6+) |\n|---|---|---|---|\n")
	for _, s := range SchedulerKnobs {
		var places []string
		for _, p := range s.Places {
			places = append(places, p.describe())
		}
		eevdf := "yes"
		if s.EEVDFRemoved {
			eevdf = "removed: reported Unsupported"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", s.Field, s.ID(), strings.Join(places, "; "), eevdf)
	}
	b.WriteString("\nA raw sysctl naming one of these `/proc/sys` files is refused (admission and agent): set the typed field.\n\n")
	powerMarkdown(&b)
	b.WriteString("## Refused sysctls\n\n")
	b.WriteString("Refused by the CRD (CEL) and again by the agent (reported `Invalid`), so neither a LatencyNode written by hand nor `latencytier agent apply --node-spec` gets around it. A name ending in `.` or `*` covers every sysctl under it.\n\n")
	b.WriteString("| sysctl | reason | why |\n|---|---|---|\n")
	for _, r := range reasons {
		for _, rule := range rules {
			if rule.Refused == r {
				fmt.Fprintf(&b, "| `%s` | %s | %s |\n", rule.pattern(), r, rule.Note)
			}
		}
	}
	b.WriteString("\nReasons:\n\n")
	for _, r := range reasons {
		fmt.Fprintf(&b, "- **%s**: %s.\n", r, strings.TrimPrefix(r.why(), "is refused: "))
	}
	b.WriteString("\n## Namespaced sysctls\n\n")
	b.WriteString("A sysctl in a namespace changes that namespace only. Allowed ones are those whose namespace the agent shares with the host; every other sysctl is global.\n\n")
	b.WriteString("| sysctl | namespace | allowed | note |\n|---|---|---|---|\n")
	ns := slices.Clone(rules)
	slices.SortStableFunc(ns, func(a, b entry) int { return strings.Compare(string(a.Namespace), string(b.Namespace)) })
	for _, rule := range ns {
		if rule.Namespace == nsGlobal {
			continue
		}
		allowed := "yes"
		if rule.Refused != "" {
			allowed = "no (" + string(rule.Refused) + ")"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", rule.pattern(), rule.Namespace, allowed, rule.Note)
	}
	return b.String()
}

func (p Place) describe() string {
	where := "`/sys/kernel/debug/sched/" + p.Debug + "`"
	if p.Proc != "" {
		where = "`" + p.Sysctl() + "`"
	}
	switch {
	case p.Since != "" && p.Until != "":
		return fmt.Sprintf("%s (%s–%s)", where, p.Since, p.Until)
	case p.Since != "":
		return fmt.Sprintf("%s (%s+)", where, p.Since)
	case p.Until != "":
		return fmt.Sprintf("%s (≤%s)", where, p.Until)
	}
	return where
}

func (r entry) pattern() string {
	if r.Prefix && !strings.HasSuffix(r.Name, ".") {
		return r.Name + "*"
	}
	return r.Name
}
