package measure

import (
	"cmp"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"latencytier.io/latencytier/agent/measure/bpf"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/internal/printable"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Attribution: who made a measured pod wait. The BPF program splits every
// run-queue wait of a measured pod's task over what ran on that CPU
// meanwhile (see runqlat.bpf.c for the method and its limits); this file
// reads the split once per window, names the offenders and ranks them.

// OffenderClass is the kind of thing a measured pod waited behind: the
// API's classes (api/v1alpha1/attribution_types.go documents each), one
// definition for the tracer, status and metrics.
type OffenderClass = v1alpha1.OffenderClass

// The classes, by their short names in this package.
const (
	OffenderSamePod        = v1alpha1.OffenderSamePod
	OffenderMeasuredPod    = v1alpha1.OffenderMeasuredPod
	OffenderPod            = v1alpha1.OffenderPod
	OffenderSystemService  = v1alpha1.OffenderSystemService
	OffenderKernelThread   = v1alpha1.OffenderKernelThread
	OffenderInterrupt      = v1alpha1.OffenderInterrupt
	OffenderIdle           = v1alpha1.OffenderIdle
	OffenderSelfThrottling = v1alpha1.OffenderSelfThrottling
	OffenderUnattributed   = v1alpha1.OffenderUnattributed
	OffenderOther          = v1alpha1.OffenderOther
)

// OffenderClasses is every class, in a fixed order.
var OffenderClasses = []OffenderClass{OffenderSamePod, OffenderMeasuredPod, OffenderPod, OffenderSystemService,
	OffenderKernelThread, OffenderInterrupt, OffenderIdle, OffenderSelfThrottling, OffenderUnattributed, OffenderOther}

// MaxOffenders is how many offenders a PodAttribution names; the rest is
// one OffenderOther entry.
const MaxOffenders = 5

// Offender is one thing a measured pod waited behind in the window.
type Offender struct {
	Class OffenderClass `json:"class"`
	// Name says which one (escaped with internal/printable): namespace/name
	// for a pod, a cgroup path, a kernel thread's comm; "" for Idle,
	// SelfThrottling, Unattributed and Other.
	Name string `json:"name,omitempty"`
	// Wait is the pod's run-queue wait charged to it.
	Wait time.Duration `json:"wait"`
}

// PodAttribution is one measured pod's run-queue wait in the window and
// what it waited behind.
type PodAttribution struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Wait is the total run-queue wait of the pod's tasks (the sum of
	// ByClass).
	Wait time.Duration `json:"wait"`
	// Waits is how many waits (switch-ins after a wait) Wait sums.
	Waits uint64 `json:"waits"`
	// ByClass is Wait split by class, every offender counted (also those
	// beyond MaxOffenders); classes with no wait are absent.
	ByClass map[OffenderClass]time.Duration `json:"byClass,omitempty"`
	// Offenders are the top MaxOffenders by Wait (ties by class and name),
	// then one OffenderOther with the rest when there is any.
	Offenders []Offender `json:"offenders,omitempty"`
}

// Share is o's part of the pod's wait, 0..1.
func (p PodAttribution) Share(o Offender) float64 {
	if p.Wait <= 0 {
		return 0
	}
	return float64(o.Wait) / float64(p.Wait)
}

// podRef is a pod the tracer measured in the window: victims map its cgroup
// IDs (pod and containers) to it.
type podRef struct{ uid, namespace, name string }

// offenderNamer says which class and name an offender has, for the pod uid
// that waited behind it.
type offenderNamer interface {
	name(victim string, o bpf.Offender) (OffenderClass, string)
}

// attribute turns the kernel's charges into a PodAttribution per measured
// pod that waited at all, most waited first. Charges of a cgroup not in
// victims (measured before the window began) are dropped.
func attribute(a *bpf.Attribution, victims map[uint64]podRef, n offenderNamer) []PodAttribution {
	type acc struct {
		ref     podRef
		wait    time.Duration
		waits   uint64
		classes map[OffenderClass]time.Duration
		by      map[Offender]time.Duration // Wait zero: the key
	}
	pods := map[string]*acc{}
	get := func(cg uint64) *acc {
		ref, ok := victims[cg]
		if !ok {
			return nil
		}
		p := pods[ref.uid]
		if p == nil {
			p = &acc{ref: ref, classes: map[OffenderClass]time.Duration{}, by: map[Offender]time.Duration{}}
			pods[ref.uid] = p
		}
		return p
	}
	for _, v := range a.Victims {
		if p := get(v.Victim); p != nil {
			p.wait += time.Duration(v.WaitNs)
			p.waits += v.Waits
			if v.OtherNs > 0 {
				p.classes[OffenderOther] += time.Duration(v.OtherNs)
				p.by[Offender{Class: OffenderOther}] += time.Duration(v.OtherNs)
			}
		}
	}
	for _, c := range a.Charges {
		p := get(c.Victim)
		if p == nil {
			continue
		}
		cl, name := n.name(p.ref.uid, c.Offender)
		p.classes[cl] += time.Duration(c.Ns)
		p.by[Offender{Class: cl, Name: name}] += time.Duration(c.Ns)
	}
	out := make([]PodAttribution, 0, len(pods))
	for _, p := range pods {
		if p.wait <= 0 {
			continue
		}
		offs := make([]Offender, 0, len(p.by))
		for o, w := range p.by {
			o.Wait = w
			offs = append(offs, o)
		}
		out = append(out, PodAttribution{Namespace: p.ref.namespace, Name: p.ref.name, Wait: p.wait, Waits: p.waits,
			ByClass: p.classes, Offenders: topOffenders(offs)})
	}
	slices.SortFunc(out, func(a, b PodAttribution) int {
		if c := cmp.Compare(b.Wait, a.Wait); c != 0 {
			return c
		}
		return cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// topOffenders keeps the MaxOffenders largest (Other never among them) and
// folds the rest into one Other.
func topOffenders(offs []Offender) []Offender {
	slices.SortFunc(offs, func(a, b Offender) int {
		if (a.Class == OffenderOther) != (b.Class == OffenderOther) {
			if a.Class == OffenderOther {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(b.Wait, a.Wait); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Class, b.Class); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	if len(offs) <= MaxOffenders {
		return offs // an Other, if any, is last
	}
	top := slices.Clone(offs[:MaxOffenders]) // Other sorts last: not among them
	other := Offender{Class: OffenderOther}
	for _, o := range offs[MaxOffenders:] {
		other.Wait += o.Wait
	}
	return append(top, other)
}

// namer resolves offenders on a live node: pods by their cgroups' IDs,
// other cgroups by walking the cpu controller's hierarchy.
type namer struct {
	m *Measurer
	// victims are the measured pods' cgroups; pods every listed pod's.
	victims map[uint64]podRef
	pods    map[uint64]podRef
	listed  []podcgroup.Pod
	indexed bool
}

func (n *namer) name(victim string, o bpf.Offender) (OffenderClass, string) {
	switch o.Kind {
	case bpf.KindIdle:
		return OffenderIdle, ""
	case bpf.KindThrottled:
		return OffenderSelfThrottling, ""
	case bpf.KindKernelThread:
		if isIRQThread(o.Comm) {
			return OffenderInterrupt, printable.String(o.Comm)
		}
		return OffenderKernelThread, printable.String(o.Comm)
	case bpf.KindTask:
		return n.cgroup(victim, o.CgroupID)
	}
	return OffenderUnattributed, ""
}

// isIRQThread: softirqs deferred to ksoftirqd/N and threaded IRQ handlers
// (irq/<n>-<name>).
func isIRQThread(comm string) bool {
	return strings.HasPrefix(comm, "ksoftirqd/") || strings.HasPrefix(comm, "irq/")
}

func (n *namer) cgroup(victim string, id uint64) (OffenderClass, string) {
	if p, ok := n.victims[id]; ok {
		if p.uid == victim {
			return OffenderSamePod, printable.String(p.namespace + "/" + p.name)
		}
		return OffenderMeasuredPod, printable.String(p.namespace + "/" + p.name)
	}
	if !n.indexed {
		n.indexed = true
		n.pods = n.m.cgroupRefs(n.listed)
	}
	if p, ok := n.pods[id]; ok {
		return OffenderPod, printable.String(p.namespace + "/" + p.name)
	}
	path, ok := n.m.cgroupPath(id)
	if !ok {
		return OffenderOther, ""
	}
	if first, _, _ := strings.Cut(path, "/"); first == n.m.kubepods() || first == n.m.kubepods()+".slice" {
		return OffenderPod, printable.String(path)
	}
	return OffenderSystemService, printable.String(path)
}

// cgroupRefs maps the cgroup IDs of pods (pod and container cgroups in the
// cpu controller) to the pods; pods without a cgroup are left out.
func (m *Measurer) cgroupRefs(pods []podcgroup.Pod) map[uint64]podRef {
	out := map[uint64]podRef{}
	for _, p := range pods {
		dirs, err := podcgroup.Find(m.root, p.UID, m.podOpts...)
		if err != nil {
			continue
		}
		for _, dir := range append([]string{dirs.Pod}, dirs.Containers...) {
			if ino, err := m.root.Inode(dir); err == nil {
				out[ino] = podRef{uid: p.UID, namespace: p.Namespace, name: p.Name}
			}
		}
	}
	return out
}

// maxCgroupWalk bounds the directories one walk of the cpu hierarchy
// visits.
const maxCgroupWalk = 50000

// cgroupPath is the path of cgroup id relative to the cpu controller's
// root ("/" for the root). An unknown ID walks the hierarchy once per
// window and caches every ID seen; IDs are not reused while the node runs.
func (m *Measurer) cgroupPath(id uint64) (string, bool) {
	if p, ok := m.cgPaths[id]; ok {
		return p, true
	}
	if m.cgWalked {
		return "", false
	}
	m.cgWalked = true
	base, _, err := podcgroup.ControllerDir(m.root, "cpu")
	if err != nil {
		return "", false
	}
	if m.cgPaths == nil || len(m.cgPaths) > maxCgroupWalk {
		m.cgPaths = map[uint64]string{}
	}
	seen := 0
	_ = filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if seen++; seen > maxCgroupWalk {
			return fs.SkipAll
		}
		if ino, err := m.root.Inode(path); err == nil {
			rel, _ := filepath.Rel(base, path)
			if rel == "." {
				rel = "/"
			}
			m.cgPaths[ino] = rel
		}
		return nil
	})
	p, ok := m.cgPaths[id]
	return p, ok
}

func (m *Measurer) kubepods() string { return podcgroup.KubepodsName(m.podOpts...) }

// AttributionCover is what a window's attribution covers.
type AttributionCover string

const (
	// AttributedNone: no attribution (BPF or attribution off, or its
	// read failed).
	AttributedNone AttributionCover = ""
	// AttributedNoPods: attribution runs, but no measured pod was tracked
	// through the window.
	AttributedNoPods AttributionCover = "NoPods"
	// AttributedPods: the wait of every pod measured through the window
	// was split (a pod that did not wait is left out of the list).
	AttributedPods AttributionCover = "Pods"
)

// readAttribution reads the window's attribution for the pods measured in
// it (nil when attribution is off or nothing was measured) and what it
// covers. A partly read attribution (err set) covers the pods.
func (m *Measurer) readAttribution(pods []podcgroup.Pod) ([]PodAttribution, AttributionCover, error) {
	if m.bpfSrc == nil || !m.bpfSrc.t.Attribution() {
		return nil, AttributedNone, nil
	}
	a, err := m.bpfSrc.t.ReadAttribution()
	if err != nil && a == nil {
		return nil, AttributedNone, err
	}
	if !m.podsTracked {
		return nil, AttributedNoPods, err
	}
	m.cgWalked = false
	n := &namer{m: m, victims: m.victims, listed: pods}
	out := attribute(a, m.victims, n)
	if err != nil {
		err = fmt.Errorf("attribution partly read: %w", err)
	}
	return out, AttributedPods, err
}
