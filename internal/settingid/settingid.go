// Package settingid is the catalogue of setting kinds: every result in a
// LatencyNode's status.settings and every journal entry is named by a
// setting ID "<kind>/<rest>", and this package is the one place those
// prefixes are spelled. Each kind is one row: how its IDs are built and
// parsed, who most likely changed one of its settings when the agent finds
// it drifted, its line in docs/knobs.md, whether it is scoped to one pod
// incarnation and whether the kernel may refuse it as immovable. The agent's
// packages, the controller and internal/knobs (which renders docs/knobs.md
// from Kinds) build and parse IDs through it; a test fails on a setting-ID
// prefix literal anywhere else. It imports nothing of the project.
package settingid

import (
	"strings"
)

// Kind is one row of the catalogue.
type Kind struct {
	// Name is the kind's first path element ("sysctl").
	Name string
	// Sub, when set, names a sub-kind below Name ("pod" of cpuset: "cpuset/pod/…").
	Sub string
	// Forms are the ID shapes shown in docs/knobs.md.
	Forms []string
	// Doc is what the kind is, after the forms in docs/knobs.md.
	Doc string
	// Culprit names who most likely changed one of its settings (the drift
	// condition's "likely …").
	Culprit string
	// PodScoped kinds name settings of one pod incarnation and below it
	// (their owner controls them, kubelet rewrites them on a resize; as a
	// metric label they are cut to "<prefix><ns>/<pod>").
	PodScoped bool
	// CanBeImmovable says the kernel may refuse a setting of this kind for
	// this boot (a managed IRQ), reported Immovable rather than Failed.
	CanBeImmovable bool
}

// Prefix starts every ID of the kind ("sysctl/", "cpuset/pod/").
func (k Kind) Prefix() string {
	if k.Sub != "" {
		return k.Name + "/" + k.Sub + "/"
	}
	return k.Name + "/"
}

// ID builds an ID of the kind from its path elements.
func (k Kind) ID(parts ...string) string { return k.Prefix() + strings.Join(parts, "/") }

// Has reports whether id is of kind k (for a kind with sub-kinds, of any).
func (k Kind) Has(id string) bool { return strings.HasPrefix(id, k.Prefix()) }

// Rest is id without the kind's prefix; false when id is not of kind k.
func (k Kind) Rest(id string) (string, bool) { return strings.CutPrefix(id, k.Prefix()) }

// The kinds, in the order docs/knobs.md lists them.
var (
	Scheduler = Kind{Name: "scheduler", Forms: []string{"scheduler/<field>"},
		Doc:     "a typed field of `spec.scheduler` (table below)",
		Culprit: sysctlWriter}
	Sysctl = Kind{Name: "sysctl", Forms: []string{"sysctl/<name>"},
		Doc:     "a raw sysctl from `spec.sysctls`, e.g. `sysctl/net.core.busy_poll`",
		Culprit: sysctlWriter}
	IRQ = Kind{Name: "irq", Forms: []string{"irq/<number>", "irq/default_smp_affinity", "irq/irqbalance"},
		Doc:     "IRQ affinity; `irq/<first>-<last>,<n>` summarises IRQs with one result; `irq/irqbalance` is the CPUs a running irqbalance is banned from through its socket",
		Culprit: "a tool writing /proc/irq (irqbalance, tuned)", CanBeImmovable: true}
	CPUSetPod = Kind{Name: "cpuset", Sub: "pod", Forms: []string{"cpuset/pod/<namespace>/<pod>/<uid>/…"},
		Doc:     "the cpuset of an opted-in pod and its containers",
		Culprit: cpusetWriter, PodScoped: true}
	CPUSet = Kind{Name: "cpuset", Forms: []string{"cpuset/<slice>", "cpuset/<slice>/AllowedCPUs", "cpuset/cgroup.subtree_control", "cpuset/pods"},
		Doc:     "the cpusets of the system slices (cgroupfs, or systemd's AllowedCPUs property) and the controller enabled for them",
		Culprit: cpusetWriter}
	CPUQuota = Kind{Name: "cpuquota", Forms: []string{"cpuquota/<namespace>/<pod>/<uid>[/<container>]"},
		Doc:     "CFS quota of an opted-in pod and its containers",
		Culprit: "kubelet or the container runtime", PodScoped: true}
	CPUBurst = Kind{Name: "cpuburst", Forms: []string{"cpuburst/<namespace>/<pod>/<uid>[/<container>]"},
		Doc:     "CFS burst (`cpuQuota.policy: Burst`) of an opted-in pod and its containers",
		Culprit: "the container runtime or another burst controller (koordinator)", PodScoped: true}
	RTSched = Kind{Name: "rtsched", Forms: []string{"rtsched/<namespace>/<pod>/<uid>", "rtsched/<namespace>/<pod>/<uid>/<tid>@<start>"},
		Doc:     "the real-time scheduling policy `spec.realtime` grants a pod's threads, one per thread incarnation (its start time in clock ticks after boot)",
		Culprit: "the pod itself (a thread calling sched_setscheduler) or chrt", PodScoped: true}
	Partition = Kind{Name: "partition", Forms: []string{"partition/exclusive/<cgroup>", "partition/<pod slice>/<container>"},
		Doc:     "cpuset partitions of `spec.cpus.partition` (section below)",
		Culprit: "the kernel (CPU hotplug, a sibling cgroup claiming the CPUs) or a container runtime writing cpuset partitions"}
	Power = Kind{Name: "power", Forms: []string{"power/cpu<N>/resume-latency", "power/cpu<N>/idle-state<K>/disable", "power/cpu<N>/governor", "power/<class>/governor"},
		Doc:     "`spec.power` (section below); the class form for a result about a whole class",
		Culprit: "tuned, power-profiles-daemon, cpupower or CRI-O's cpu-c-states annotation"}
	Boot = Kind{Name: "boot", Forms: []string{"boot/grub"},
		Doc:     "the GRUB drop-in with the kernel command line the agent stages for the next boot (`spec.cpus` boot parameters)",
		Culprit: "an administrator or a package editing GRUB's drop-ins"}
)

const (
	sysctlWriter = "another sysctl writer (systemd-sysctl, tuned, an administrator)"
	cpusetWriter = "systemd (AllowedCPUs) or kubelet"
)

// Kinds lists every kind; a sub-kind comes before its parent so Parse
// finds the longest prefix first.
var Kinds = []Kind{Scheduler, Sysctl, IRQ, CPUSetPod, CPUSet, CPUQuota, CPUBurst, RTSched, Partition, Power, Boot}

// Parse returns the kind of id and the rest after its prefix; false for an
// ID of no kind (or an empty rest).
func Parse(id string) (Kind, string, bool) {
	for _, k := range Kinds {
		if rest, ok := k.Rest(id); ok && rest != "" {
			return k, rest, true
		}
	}
	return Kind{}, "", false
}

// Culprit names who most likely changed setting id; an ID of no kind is
// taken for a sysctl's.
func Culprit(id string) string {
	if k, _, ok := Parse(id); ok {
		return k.Culprit
	}
	return sysctlWriter
}

// PodScope returns "<prefix><namespace>/<pod>" for an ID of a pod-scoped
// kind, false for any other.
func PodScope(id string) (string, bool) {
	k, rest, ok := Parse(id)
	if !ok || !k.PodScoped {
		return "", false
	}
	ns, rest, _ := strings.Cut(rest, "/")
	name, _, _ := strings.Cut(rest, "/")
	return k.Prefix() + ns + "/" + name, true
}

// Pod is the ID of the setting kind k holds for pod namespace/name/uid
// (CPUQuota, CPUBurst, CPUSetPod, RTSched).
func Pod(k Kind, namespace, name, uid string) string { return k.ID(namespace, name, uid) }

// Thread is the ID of one thread's policy below pod ID podID: "<podID>/<tid>@<start>".
func Thread(podID, tid, start string) string { return podID + "/" + tid + "@" + start }

// IsThread reports whether id names one thread's policy (an RTSched ID
// with a "<tid>@<start>" element), not a pod's summary.
func IsThread(id string) bool {
	rest, ok := RTSched.Rest(id)
	return ok && strings.Contains(rest, "@")
}
