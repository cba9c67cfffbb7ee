// Package partition isolates a pod's exclusive CPUs at run time with a
// cgroup v2 cpuset partition: the CPUs are written to cpuset.cpus.exclusive
// on every cgroup from kubepods down to the container, top-down, and the
// container's cpuset.cpus.partition is set to "isolated" (no load
// balancing, no unbound workqueues: 6.8+) or "root" (a scheduling domain of
// its own). It produces knobs in that order, so the engine journals every
// original before the first write and reverts in reverse (partition back to
// "member" first, then the exclusive CPUs removed bottom-up). It never
// creates a cgroup (kubelet and the runtime own them).
//
// Kernel interfaces (Documentation/admin-guide/cgroup-v2.rst, "Cpuset
// Interface Files"): the "isolated" partition type since 6.1 (local
// partitions only, every ancestor a partition root); cpuset.cpus.exclusive
// and remote partitions, deep in the tree under non-partition ancestors,
// since 6.7 ("cgroup/cpuset: Add cpuset.cpus.exclusive for v2",
// "cgroup/cpuset: Introduce remote partition"); the root's
// cpuset.cpus.isolated and the exclusion of isolated CPUs from unbound
// workqueues since 6.8 ("cgroup/cpuset: Take isolated CPUs out of workqueue
// unbound cpumask", "cgroup/cpuset: Expose cpuset.cpus.isolated"). Kubelet's
// pods are remote partitions, so Probe requires cpuset.cpus.exclusive.
package partition

import (
	"fmt"
	"path/filepath"
	"strings"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
)

// Kernel files of the cpuset controller this package reads or writes.
const (
	ExclusiveFile          = "cpuset.cpus.exclusive"
	ExclusiveEffectiveFile = "cpuset.cpus.exclusive.effective"
	PartitionFile          = "cpuset.cpus.partition"
	// IsolatedFile is the root cgroup's list of CPUs in isolated
	// partitions (6.8+).
	IsolatedFile = "cpuset.cpus.isolated"
)

// Type is a cpuset.cpus.partition value.
type Type string

const (
	// Member is an ordinary cgroup, part of its parent's partition.
	Member Type = "member"
	// Root makes the cgroup a partition of its own: its CPUs form a
	// separate scheduling domain, load-balanced among themselves.
	Root Type = "root"
	// Isolated is a partition without load balancing: every CPU is its
	// own island, so a multi-threaded workload must pin its threads.
	Isolated Type = "isolated"
)

// ParseType accepts the types a request may ask for: root or isolated.
func ParseType(s string) (Type, error) {
	switch t := Type(s); t {
	case Root, Isolated:
		return t, nil
	}
	return "", fmt.Errorf("partition type %q: want %q or %q", s, Root, Isolated)
}

// State is what cpuset.cpus.partition reads: a type, and for a partition
// root the kernel holds invalid, the reason it gives ("isolated invalid
// (Cpu list in cpuset.cpus not exclusive)").
type State struct {
	Type Type
	// Invalid is true when the kernel reports the partition invalid:
	// it then behaves like a member.
	Invalid bool
	// Reason is the kernel's text in parentheses (may be empty).
	Reason string
}

// ParseState parses a cpuset.cpus.partition value.
func ParseState(s string) (State, error) {
	s = strings.TrimSpace(s)
	typ, rest, _ := strings.Cut(s, " ")
	st := State{Type: Type(typ)}
	switch st.Type {
	case Member, Root, Isolated:
	default:
		return State{}, fmt.Errorf("cpuset.cpus.partition %q: unknown partition type %q", s, typ)
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return st, nil
	}
	reason, ok := strings.CutPrefix(rest, "invalid")
	if !ok || st.Type == Member {
		return State{}, fmt.Errorf("cpuset.cpus.partition %q: want \"<type>\" or \"<type> invalid (<reason>)\"", s)
	}
	reason = strings.TrimSpace(reason)
	if reason != "" {
		if !strings.HasPrefix(reason, "(") || !strings.HasSuffix(reason, ")") {
			return State{}, fmt.Errorf("cpuset.cpus.partition %q: the reason is not in parentheses", s)
		}
		reason = strings.TrimSpace(reason[1 : len(reason)-1])
	}
	st.Invalid, st.Reason = true, reason
	return st, nil
}

// Err is nil for a valid partition and otherwise an error naming the
// kernel's reason.
func (s State) Err() error {
	if !s.Invalid {
		return nil
	}
	reason := s.Reason
	if reason == "" {
		reason = "no reason given"
	}
	return fmt.Errorf("the kernel holds the %s partition invalid: %s", s.Type, reason)
}

// SameType reports whether two cpuset.cpus.partition values name the same
// partition type, valid or not. Revert uses it to recognise a partition
// the agent made that the kernel has since invalidated: "isolated invalid
// (...)" is still the agent's "isolated" and goes back to "member".
func SameType(a, b string) bool {
	sa, err1 := ParseState(a)
	sb, err2 := ParseState(b)
	return err1 == nil && err2 == nil && sa.Type == sb.Type
}

// Capability says whether this node can isolate CPUs with partitions.
type Capability struct {
	// Supported is true on cgroup v2 with cpuset.cpus.exclusive in the
	// kubepods cgroup (6.7+).
	Supported bool
	// Reason explains an unsupported node, naming what is missing.
	Reason string
	// IsolatedList is true when the root has cpuset.cpus.isolated (6.8+;
	// from the same release unbound workqueues leave isolated CPUs).
	IsolatedList bool
}

// DefaultKubepods is kubelet's top-level pod cgroup with the systemd driver.
var DefaultKubepods = podcgroup.DefaultKubepods + ".slice"

// Kubepods is kubelet's top-level pod cgroup on the cgroup v2 root:
// kubepods.slice with the systemd driver, kubepods with cgroupfs (the
// systemd name when neither exists, so Probe reports it missing). Every
// caller that probes or writes partitions names the cgroup through it.
func Kubepods(root *host.Root) string {
	if !root.Exists(root.Cgroup(DefaultKubepods)) && root.Exists(root.Cgroup(podcgroup.DefaultKubepods)) {
		return podcgroup.DefaultKubepods
	}
	return DefaultKubepods
}

// Probe checks the interfaces partitions need, reading only: the unified
// hierarchy, the cpuset controller, the kubepods cgroup (kubepods, e.g.
// "kubepods.slice") with cpuset.cpus and cpuset.cpus.exclusive.
func Probe(root *host.Root, kubepods string) Capability {
	unsupported := func(format string, a ...any) Capability {
		return Capability{Reason: fmt.Sprintf(format, a...)}
	}
	if v, _ := podcgroup.Mode(root); v != 2 {
		return unsupported("cgroup v%d: cpuset partitions need the cgroup v2 unified hierarchy", v)
	}
	base := root.Cgroup()
	ctrl, err := root.ReadString(filepath.Join(base, "cgroup.controllers"))
	if err != nil || !hasToken(ctrl, "cpuset") {
		return unsupported("the cpuset controller is not available in the cgroup v2 root %s (cgroup.controllers: %q)", base, ctrl)
	}
	if err := checkName(kubepods); err != nil {
		return unsupported("kubepods cgroup: %v", err)
	}
	kp := filepath.Join(base, kubepods)
	switch {
	case !root.IsDir(kp):
		return unsupported("no %s cgroup under %s (kubelet not running with this cgroup root)", kubepods, base)
	case !root.Exists(filepath.Join(kp, "cpuset.cpus")):
		return unsupported("the cpuset controller is not enabled for %s (not in %s/cgroup.subtree_control)", kp, base)
	case !root.Exists(filepath.Join(kp, ExclusiveFile)):
		return unsupported("this kernel has no %s (added in Linux 6.7): a partition below kubepods is impossible; the isolated CPUs need isolcpus= on the kernel command line", ExclusiveFile)
	}
	return Capability{Supported: true, IsolatedList: root.Exists(filepath.Join(base, IsolatedFile))}
}

func hasToken(s, tok string) bool {
	for _, f := range strings.Fields(s) {
		if f == tok {
			return true
		}
	}
	return false
}
