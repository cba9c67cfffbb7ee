package knobs

import (
	"fmt"
	"slices"
	"strings"

	"latencytier.io/latencytier/internal/settingid"
)

// CELRule is one x-kubernetes-validations entry of the API's Sysctl type.
type CELRule struct {
	Rule              string
	MessageExpression string
	// FieldPath is where the API server reports a failure, relative to
	// the Sysctl ("" = the Sysctl itself, spec.sysctls[i]).
	FieldPath string
}

// Marker is the kubebuilder marker that generates the rule.
func (c CELRule) Marker() string {
	m := "// +kubebuilder:validation:XValidation:rule=`" + c.Rule + "`,messageExpression=`" + c.MessageExpression + "`"
	if c.FieldPath != "" {
		m += ",fieldPath=`" + c.FieldPath + "`"
	}
	return m
}

// CELRules are the Sysctl type's rules derived from the catalogue: one for
// the typed-field duplicates, one per refusal reason, one for the value's
// characters, and one per allowlisted name for its value's bounds.
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
	out = append(out, CELRule{
		Rule:              `!self.value.contains('\n') && !self.value.contains('\x00')`,
		MessageExpression: "'sysctl ' + self.name + ' value holds a newline or NUL character: the kernel would take only the part before it'",
	})
	return append(out, ValueRules()...)
}

func celList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "'" + x + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// markdown renders docs/knobs.md, with the census of one kernel.
func markdown(c Census) string {
	var b strings.Builder
	b.WriteString("# Kernel knobs\n\n")
	b.WriteString("Generated from `internal/knobs` (`go test ./internal/knobs -update`); do not edit by hand.\n\n")
	b.WriteString("## Setting IDs\n\n")
	b.WriteString("Every result in `LatencyNode` `status.settings` and every journal entry is named by a setting ID:\n\n")
	for _, k := range settingid.Kinds {
		b.WriteString("- `" + strings.Join(k.Forms, "`, `") + "` — " + k.Doc)
		if k.CanBeImmovable {
			b.WriteString("; the kernel may refuse one for this boot (`Immovable`)")
		}
		b.WriteString("; drift likely from " + k.Culprit + "\n")
	}
	b.WriteString("\n")
	b.WriteString("## Typed scheduler knobs\n\n")
	b.WriteString("The agent probes the places in order and uses the first that exists; the kernel versions say where each is expected.\n\n")
	b.WriteString("The last column says what the knob does while a sched_ext BPF scheduler runs the node's tasks " +
		"(`status.kernel.activeClass: ext`; the `SchedExtSchedulerLoaded` finding names it).\n\n")
	b.WriteString("| field | setting ID | places (kernel versions) | EEVDF (6.6+) | under sched_ext |\n|---|---|---|---|---|\n")
	for _, s := range SchedulerKnobs {
		var places []string
		for _, p := range s.Places {
			places = append(places, p.describe())
		}
		eevdf := "yes"
		if s.EEVDFRemoved {
			eevdf = "removed: reported Unsupported"
		}
		ext := "still applies: real-time tasks run above sched_ext"
		if s.FairOnly {
			ext = "written, but acts only on tasks left in the fair class (none unless the scheduler runs in partial mode)"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s |\n", s.Field, s.ID(), strings.Join(places, "; "), eevdf, ext)
	}
	b.WriteString("\nA raw sysctl naming one of these `/proc/sys` files is refused (admission and agent): set the typed field.\n\n")
	fmt.Fprintf(&b, "`%s` (setting ID `%s`) is not a file but the scheduling class: `Fair`, or `Tier`, latencytier's own "+
		"sched_ext scheduler (experimental, behind the manager's `TierScheduler` feature gate). A node whose kernel ejected "+
		"that scheduler reports the setting `Fallback` with the kernel's reason. See [sched_ext.md](sched_ext.md).\n\n",
		SchedulerClassField, SchedulerClassID)
	powerMarkdown(&b)
	partitionMarkdown(&b)
	sysctlMarkdown(&b)
	b.WriteString(censusStart)
	c.markdown(&b)
	return b.String()
}

// sysctlMarkdown documents the raw sysctl classes.
func sysctlMarkdown(b *strings.Builder) {
	b.WriteString("## Raw sysctls\n\n")
	b.WriteString("Every name in `spec.sysctls` is in exactly one class:\n\n")
	b.WriteString("- **" + string(ClassTyped) + "**: a typed field owns the file (table above); refused, set the field.\n")
	b.WriteString("- **" + string(ClassAllowed) + "**: on the built-in allowlist below; accepted.\n")
	b.WriteString("- **" + string(ClassUnlockable) + "**: every other name; accepted only when the cluster admin lists it (below).\n")
	b.WriteString("- **" + string(ClassRefused) + "**: refused even when the admin lists it (table below).\n\n")
	b.WriteString("### Built-in allowlist\n\n")
	b.WriteString("What latency tuning needs (RHEL tuned's realtime, network-latency and latency-performance profiles, and the per-CPU timers, watchdogs, writeback, compaction and softirq work that delay the service's runnable threads): only settings the node has once, which the agent's revert restores completely. No network namespace has a copy of them to inherit.\n\n")
	b.WriteString("Every allowlisted value has a type and bounds, chosen from the kernel's own limits (Documentation/admin-guide/sysctl) and the ranges latency tuning uses: the CRD refuses a value outside them naming `spec.sysctls[i].value`, the sysctl and the bounds, and the agent reports it `Invalid` without writing it, whatever its LatencyNode says. Names the admin unlocks have no bounds: their values are only length-bounded (1 to " + fmt.Sprint(MaxValueChars) + " characters on one line).\n\n")
	b.WriteString("| sysctl | namespace | value | why latency tuning needs it |\n|---|---|---|---|\n")
	for _, r := range rules {
		if r.Allowed {
			fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", r.Name, r.Namespace.describe(), r.Value.describe(), r.Note)
		}
	}
	b.WriteString("\n### The cluster admin's unlock\n\n")
	fmt.Fprintf(b, "Any other name is accepted only when the cluster admin lists it in key `%s` of ConfigMap `%s` in the operator namespace (shipped empty; neither the manager's nor the agent's role may write ConfigMaps there), as kubelet's `--allowed-unsafe-sysctls` does. ", AdminKey, AdminConfigMap)
	b.WriteString("Entries are separated by commas or newlines: an exact name, a prefix ending in `.` (every name under it) or one ending in `*` (every name starting with what precedes it); a lone `*` or `.` unlocks nothing.\n\n")
	fmt.Fprintf(b, "- Admission: the ValidatingAdmissionPolicy `%s` (config/admission) takes the ConfigMap as its parameter and refuses, on LatencyProfile create and update, a name neither on the allowlist nor listed, naming `spec.sysctls[i].name`. Without the ConfigMap it refuses every LatencyProfile create and update (parameterNotFoundAction: Deny). On update, names the old object already carries are not checked again.\n", AllowlistPolicyName)
	b.WriteString("- Node: the agent reads the same key from the ConfigMap mounted into its pod (`--allowed-sysctls-file`) and reports any other name `Invalid` without writing it, whatever its LatencyNode says; a name the admin removes is reverted on the next pass. kubelet refreshes the mounted ConfigMap about once a minute, so for that long after an unlock a node may still report the name `Invalid` (and keep applying a removed one).\n\n")
	b.WriteString("Unlocking a namespaced sysctl changes the host's namespace only (the agent runs with hostNetwork, in the initial user namespace). Some are inherited:\n\n")
	b.WriteString("| sysctl | namespace | inherited by new namespaces | note |\n|---|---|---|---|\n")
	ns := slices.Clone(rules)
	slices.SortStableFunc(ns, func(a, b entry) int { return strings.Compare(string(a.Namespace), string(b.Namespace)) })
	for _, rule := range ns {
		if rule.Namespace == nsGlobal || rule.Refused != "" || rule.Allowed {
			continue
		}
		inherited := "no"
		if rule.Inherited {
			inherited = "**yes**: pods created while it is set keep it after the revert"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", rule.pattern(), rule.Namespace, inherited, rule.Note)
	}
	b.WriteString("\n### Refused sysctls\n\n")
	b.WriteString("Refused by the CRD (CEL) and again by the agent (reported `Invalid`), whatever the admin lists, so neither a LatencyNode written by hand nor `latencytier agent apply --node-spec` gets around it. A name ending in `.` or `*` covers every sysctl under it.\n\n")
	b.WriteString("| sysctl | namespace | reason | why |\n|---|---|---|---|\n")
	for _, r := range reasons {
		for _, rule := range rules {
			if rule.Refused == r {
				fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", rule.pattern(), rule.Namespace.describe(), r, rule.Note)
			}
		}
	}
	b.WriteString("\nReasons:\n\n")
	for _, r := range reasons {
		fmt.Fprintf(b, "- **%s**: %s.\n", r, strings.TrimPrefix(r.why(), "is refused: "))
	}
	b.WriteString("\n")
}

func (n namespace) describe() string {
	if n == nsGlobal {
		return "global"
	}
	return string(n)
}

// censusStart opens the census section of docs/knobs.md: the rest of the
// file does not depend on the kernel it is generated on.
const censusStart = "## Census of one kernel\n\n"

// Census counts the sysctls one kernel lists under /proc/sys by class.
type Census struct {
	// Release is the kernel's osrelease.
	Release string
	Counts  map[Class]int
	// Absent are allowlisted names the kernel does not list (reported
	// Unsupported there).
	Absent []string
}

// CensusNames drops the per-interface sysctls of every interface but lo
// (net.<family>.conf.<iface>.*, net.<family>.neigh.<iface>.*): each
// interface repeats lo's set, and which interfaces exist is the machine's,
// not the kernel's.
func CensusNames(names []string) []string {
	var out []string
	for _, n := range names {
		parts := strings.SplitN(n, ".", 5)
		if len(parts) == 5 && parts[0] == "net" && (parts[2] == "conf" || parts[2] == "neigh") &&
			parts[3] != "all" && parts[3] != "default" && parts[3] != "lo" {
			continue
		}
		out = append(out, n)
	}
	return out
}

// TakeCensus classifies names (dotted, as listed under /proc/sys).
func TakeCensus(release string, names []string) Census {
	c := Census{Release: release, Counts: map[Class]int{}}
	for _, n := range names {
		c.Counts[Classify(n)]++
	}
	for _, a := range Allowed() {
		if !slices.Contains(names, a) {
			c.Absent = append(c.Absent, a)
		}
	}
	return c
}

func (c Census) total() int {
	n := 0
	for _, v := range c.Counts {
		n += v
	}
	return n
}

func (c Census) markdown(b *strings.Builder) {
	fmt.Fprintf(b, "Kernel `%s` lists %d sysctls under `/proc/sys` (per-interface ones counted for `lo` only, in the initial network namespace):\n\n", c.Release, c.total())
	b.WriteString("| class | sysctls |\n|---|---|\n")
	for _, cl := range Classes {
		fmt.Fprintf(b, "| %s | %d |\n", cl, c.Counts[cl])
	}
	if len(c.Absent) > 0 {
		fmt.Fprintf(b, "\n%s%s`.\n", absentIntro, strings.Join(c.Absent, "`, `"))
	}
	b.WriteString("\nTaken by `TestDocIsCurrent` on that kernel; on another kernel the test compares everything above this section only.\n")
}

const absentIntro = "Allowlisted but absent from this kernel (reported `Unsupported` here): `"

// parseCensus reads the census back from a rendered docs/knobs.md.
func parseCensus(doc string) (Census, bool) {
	i := strings.Index(doc, censusStart)
	if i < 0 {
		return Census{}, false
	}
	c := Census{Counts: map[Class]int{}}
	var total int
	if _, err := fmt.Sscanf(doc[i+len(censusStart):], "Kernel `%s lists %d sysctls", &c.Release, &total); err != nil {
		return Census{}, false
	}
	c.Release = strings.TrimSuffix(c.Release, "`")
	for _, cl := range Classes {
		row := "| " + string(cl) + " | "
		j := strings.Index(doc[i:], row)
		if j < 0 {
			return Census{}, false
		}
		var n int
		if _, err := fmt.Sscanf(doc[i+j+len(row):], "%d", &n); err != nil {
			return Census{}, false
		}
		c.Counts[cl] = n
	}
	if j := strings.Index(doc[i:], absentIntro); j >= 0 {
		rest := doc[i+j+len(absentIntro):]
		if end := strings.Index(rest, "`.\n"); end >= 0 {
			c.Absent = strings.Split(rest[:end], "`, `")
		}
	}
	return c, true
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
