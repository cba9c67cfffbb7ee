// Package snapshot is one view of the node per pass: what the agent reads
// from the host once at the start of a pass (the running kernel's command
// line) and what it parses once from the spec (the profile's CPU classes),
// so rendering (agent/desired), findings (agent/measure, agent/power) and
// status (agent/facts, agent/loop) decide from the same values instead of
// each reading /proc/cmdline and parsing spec.cpus again.
package snapshot

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/owners"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Node is the view of the node one pass decides from.
type Node struct {
	// Cmdline is the running kernel's command line (/proc/cmdline); ""
	// when unreadable (CmdlineErr says why).
	Cmdline    string
	CmdlineErr error
	// CPUs are the profile's CPU classes, parsed from spec.cpus.
	CPUs CPUs
	// Owners are the node's other writers (agent/owners.Detect), read
	// once the pass knows the node's pods; the plan leaves what they own.
	Owners owners.Set
}

// CPUs are a profile's reserved and isolated CPU sets, each empty when the
// field is unset or not a cpulist (Err names the first such field;
// ReservedErr and IsolatedErr are the cpulist parser's own errors).
type CPUs struct {
	Reserved, Isolated       cpuset.CPUSet
	Err                      error
	ReservedErr, IsolatedErr error
}

// Read reads the node once for a pass with tuning t.
func Read(root *host.Root, t v1alpha1.TuningSpec) Node {
	n := Node{CPUs: ParseCPUs(t.CPUs)}
	n.Cmdline, n.CmdlineErr = root.ReadString(root.Proc("cmdline"))
	return n
}

// For is n with the CPU classes of another tuning (the measurement-only
// tuning of a Baseline or Revert pass): the node's own facts are kept.
func (n Node) For(t v1alpha1.TuningSpec) Node {
	n.CPUs = ParseCPUs(t.CPUs)
	return n
}

// Isolation is the command line's isolcpus, nohz_full and rcu_nocbs
// parameters (facts.Isolation).
func (n Node) Isolation() []string { return facts.Isolation(n.Cmdline) }

// HasArg reports whether the command line holds arg exactly (e.g.
// "idle=poll"), before a "--" that hands the rest to init.
func (n Node) HasArg(arg string) bool {
	args := strings.Fields(n.Cmdline)
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[:i]
	}
	return slices.Contains(args, arg)
}

// ParseCPUs parses cpus.reserved and cpus.isolated. The CRD validates
// them; the agent does again, and an unparsable field leaves its set empty
// with Err naming it.
func ParseCPUs(c *v1alpha1.CPUSpec) CPUs {
	out := CPUs{Reserved: cpuset.New(), Isolated: cpuset.New()}
	if c == nil {
		return out
	}
	var rerr, ierr error
	if c.Reserved != nil {
		if set, err := cpulist.Parse(*c.Reserved); err == nil {
			out.Reserved = set
		} else {
			out.ReservedErr = err
			rerr = fmt.Errorf("cpus.reserved %q: not a cpulist: %w", *c.Reserved, err)
		}
	}
	if c.Isolated != nil {
		if set, err := cpulist.Parse(*c.Isolated); err == nil {
			out.Isolated = set
		} else {
			out.IsolatedErr = err
			ierr = fmt.Errorf("cpus.isolated %q: not a cpulist: %w", *c.Isolated, err)
		}
	}
	out.Err = rerr
	if out.Err == nil {
		out.Err = ierr
	}
	return out
}
