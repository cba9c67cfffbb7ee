// Package podcgroup finds a pod's cgroups on the node: the pod-level and
// container-level directories of the cpu controller, for both kubelet cgroup
// drivers (cgroupfs and systemd) and both cgroup versions. It also owns the
// Pod value the setting packages (cpuquota, cpuset) work on and the opt-in
// rule for CFS quota removal.
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
	// OptedIn is true when the pod asked for CFS quota removal (see OptedIn).
	OptedIn bool
}

// OptedIn reports whether a pod opts into CFS quota removal: the annotation
// latencytier.io/cpu-quota: disable, or labels matching the profile's
// cpuQuota.podSelector. A nil selector matches nothing; an empty selector
// matches every pod (Kubernetes semantics); an invalid one matches nothing.
func OptedIn(annotations, podLabels map[string]string, selector *metav1.LabelSelector) bool {
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
