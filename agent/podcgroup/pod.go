// Package podcgroup finds a pod's cgroups on the node: the pod-level and
// container-level directories of the cpu controller, for both kubelet cgroup
// drivers (cgroupfs and systemd) and both cgroup versions. It also owns the
// Pod value the setting packages (cpuquota, cpuset) work on and the opt-in
// rules: a pod asks (Asks), its namespace is granted (Granted).
package podcgroup

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Pod is what the agent needs to know about one pod running on its node.
type Pod struct {
	UID       string
	Namespace string
	Name      string
	// QOSClass is Guaranteed, Burstable or BestEffort (status.qosClass).
	QOSClass    string
	Labels      map[string]string
	Annotations map[string]string
	// ContainerIDs are the runtime IDs from status.containerStatuses, with or
	// without the "containerd://" scheme prefix.
	ContainerIDs []string
	// NamespaceLabels are the labels of the pod's Namespace, matched against
	// the profile's namespace selectors (nil when the Namespace is unknown).
	NamespaceLabels map[string]string
	// OptedIn is true when the pod asked for CFS quota removal (Asks) and
	// cpuQuota.namespaceSelector grants it to the pod's namespace: only then
	// does cpuquota remove its limit (policy Remove) or add a burst (Burst).
	OptedIn bool
	// Burst is true when OptedIn comes from policy Burst: the pod keeps its
	// quota and gets a CFS burst over it (so its throttling is no sign of a
	// failed removal).
	Burst bool
	// Resizing is true while kubelet resizes the pod in place (condition
	// PodResizeInProgress): it is about to write new quotas, which the
	// kernel refuses below a cgroup's burst, so cpuquota's Burst policy
	// yields its burst until the resize is done.
	Resizing bool
	// Isolated is true when the pod asked (Asks) and cpus.namespaceSelector
	// grants the isolated CPUs to its namespace: only then does cpuset keep
	// it there.
	Isolated bool
}

// Asks reports whether a pod asks to be tuned: the annotation
// latencytier.io/cpu-quota: disable, or labels matching the profile's
// cpuQuota.podSelector. A nil selector matches nothing; an empty selector
// matches every pod (Kubernetes semantics); an invalid one matches nothing.
// Asking is the pod owner's side; Granted is the cluster admin's.
func Asks(annotations, podLabels map[string]string, selector *metav1.LabelSelector) bool {
	if annotations[v1alpha1.CPUQuotaAnnotation] == v1alpha1.CPUQuotaDisable {
		return true
	}
	if selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(podLabels))
}

// Granted reports whether a namespace selector of the profile admits a
// namespace with these labels. A nil selector grants nothing (the CRD
// requires one; an object that slipped past it fails closed); an empty one
// grants every namespace; an invalid one grants nothing.
func Granted(namespaceLabels map[string]string, selector *v1alpha1.NamespaceSelector) bool {
	if selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector((*metav1.LabelSelector)(selector))
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(namespaceLabels))
}
