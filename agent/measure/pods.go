package measure

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"latencytier.io/latencytier/agent/measure/bpf"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
)

// The measured pods are the ones whose own run delay the agent reports
// beside the node's (status.current.pods, the evidence a rollout verdict
// may rest on): pods granted a tuning (CFS quota removal or the isolated
// CPUs, each by its own namespace grant) and pods matching
// measurement.podSelector in a namespace measurement.namespaceSelector
// selects (labels are the pod owner's: without the namespace grant a
// tenant's pod labelled like the tier's would sway a rollout verdict).
// Their tasks are found by
// cgroup, not by pid, so the agent needs no view of the host's pid
// namespace: the BPF program checks each task it switches in against the
// cgroup IDs of the pods and their containers. Only tasks directly in a pod
// or container cgroup count (not those of cgroups nested below a
// container's). The schedstat fallback reports no pod figure.

// Measured says whether pod p is one of the measured pods under t: the
// pods whose run-queue wait is traced and attributed.
func Measured(t v1alpha1.TuningSpec, p podcgroup.Pod) bool { return measured(t, p) }

// measured says whether pod p is one of the measured pods under t.
func measured(t v1alpha1.TuningSpec, p podcgroup.Pod) bool {
	if p.OptedIn || p.Isolated {
		return true
	}
	if t.Measurement == nil || t.Measurement.PodSelector == nil || !podcgroup.Granted(p.NamespaceLabels, t.Measurement.NamespaceSelector) {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(t.Measurement.PodSelector)
	return err == nil && sel.Matches(labels.Set(p.Labels))
}

// measuredPods filters pods down to the measured ones.
func measuredPods(t v1alpha1.TuningSpec, pods []podcgroup.Pod) []podcgroup.Pod {
	var out []podcgroup.Pod
	for _, p := range pods {
		if measured(t, p) {
			out = append(out, p)
		}
	}
	return out
}

// podCgroupIDs are the cgroup IDs (directory inode numbers, which are the
// kernfs node IDs on 64-bit kernels) of the pods' cgroups and their
// containers' in the cpu controller, at most bpf.MaxPodCgroups, each marked
// Limited when the pod has a CFS quota. A pod without a cgroup right now is
// skipped: its tasks are not on this node.
func (m *Measurer) podCgroupIDs(pods []podcgroup.Pod) ([]bpf.PodCgroup, map[uint64]podRef, error) {
	var ids []bpf.PodCgroup
	refs := map[uint64]podRef{}
	for _, p := range pods {
		dirs, err := podcgroup.Find(m.root, p.UID, m.podOpts...)
		if err != nil {
			continue
		}
		limited := m.thr.HasLimit(dirs)
		for _, dir := range append([]string{dirs.Pod}, dirs.Containers...) {
			ino, err := m.root.Inode(dir)
			if err != nil {
				continue
			}
			if len(ids) == bpf.MaxPodCgroups {
				return ids, refs, fmt.Errorf("more than %d pod and container cgroups; measuring the first", bpf.MaxPodCgroups)
			}
			ids = append(ids, bpf.PodCgroup{ID: ino, Limited: limited})
			refs[ino] = podRef{uid: p.UID, namespace: p.Namespace, name: p.Name}
		}
	}
	return ids, refs, nil
}

// podLatency returns the measured pods' run delay and its attribution over
// the window that ends now (nil when no pod was measured through all of it,
// or on the schedstat fallback) and makes pods the set measured in the next
// window.
func (m *Measurer) podLatency(t v1alpha1.TuningSpec, pods []podcgroup.Pod) (*v1alpha1.LatencySummary, []PodAttribution, AttributionCover) {
	if m.bpfSrc == nil {
		return nil, nil, AttributedNone
	}
	var out *v1alpha1.LatencySummary
	perCPU, err := m.bpfSrc.pods()
	switch {
	case err != nil:
		m.log.Info("Read no pod run-delay histogram", "reason", err.Error())
	case m.podsTracked:
		var h Hist
		for cpu := range perCPU {
			h.Add(&perCPU[cpu])
		}
		c := classLatency(ClassNode, &h)
		out = &v1alpha1.LatencySummary{Samples: c.Samples, P50: c.P50, P99: c.P99, P999: c.P999, Max: c.Max}
	}
	attr, cover, err := m.readAttribution(pods)
	if err != nil {
		m.log.Info("Read no run-delay attribution", "reason", err.Error())
	}
	m.traced = tracedPods(m.victims)
	m.podRunQueue = nil
	if m.podsTracked {
		if m.podRunQueue, err = m.slots.read(m.bpfSrc.t, m.victims); err != nil {
			m.log.Info("Read no per-pod run-delay histogram", "reason", err.Error())
		}
	}
	ids, refs, err := m.podCgroupIDs(measuredPods(t, pods))
	if err != nil {
		m.log.Info("Measuring pods' run delay partly", "reason", err.Error())
	}
	fresh, shared := m.slots.assign(podUIDs(refs))
	if err := sharedErr(shared); err != nil {
		m.log.Info("Measuring pods' run-queue p99 partly", "reason", err.Error())
	}
	m.podsShared = shared
	if err := m.bpfSrc.t.SetPodCgroups(m.slots.withSlots(ids, refs)); err != nil {
		m.log.Info("Measuring no pod's run delay next window", "reason", err.Error())
		ids, refs = nil, nil
		_ = m.bpfSrc.t.SetPodCgroups(nil)
		m.slots = podSlots{} // every slot is re-based when given again
	} else if err := m.slots.rebase(m.bpfSrc.t, fresh); err != nil {
		m.log.Info("Measuring no pod's run-queue p99 next window", "reason", err.Error())
		m.slots = podSlots{}
	}
	m.podsTracked = len(ids) > 0
	m.victims = refs
	return out, attr, cover
}

// tracedPods are the pods (namespace/name) whose cgroups victims holds:
// the ones the tracer measured through the window that ends.
func tracedPods(victims map[uint64]podRef) map[string]bool {
	out := make(map[string]bool, len(victims))
	for _, r := range victims {
		out[r.namespace+"/"+r.name] = true
	}
	return out
}
