package controllers

import (
	"fmt"
	"maps"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// Names of the agent's objects in the operator namespace.
const (
	agentDaemonSetName      = "latencytier-agent"
	agentServiceAccountName = "latencytier-agent"
	agentContainerName      = "agent"
	// agentMetricsPortName is the container port the PodMonitor
	// (config/prometheus) scrapes.
	agentMetricsPortName = "metrics"
	agentAppLabel        = "app.kubernetes.io/name"
	agentComponentLabel  = "app.kubernetes.io/component"
	// hostRootMountPath is where the node's root filesystem appears in the
	// agent container; the agent's host.Root is built on it.
	hostRootMountPath = "/host"
	// allowedSysctlsDir is where the cluster admin's sysctl unlock
	// (ConfigMap knobs.AdminConfigMap) appears in the agent container.
	allowedSysctlsDir = "/etc/latencytier/sysctls"
)

// agentOptions are the manager flags that shape the agent DaemonSet.
type agentOptions struct {
	Namespace string
	Image     string
	Args      []string
	// MetricsPort is the agent's metrics port on the node; 0 serves none.
	MetricsPort int32
}

// agentSelectorLabels select the agent's pods.
func agentSelectorLabels() map[string]string {
	return map[string]string{agentAppLabel: "latencytier", agentComponentLabel: "agent"}
}

// realtimeGranted lists the profiles that grant realtime (spec.realtime
// set), the ones being deleted included: a deleted profile's revert restores
// its pods' thread policies with sched_setattr too, and the finalizer keeps
// it until every node has reverted.
func realtimeGranted(profiles []v1alpha1.LatencyProfile) []string {
	var names []string
	for i := range profiles {
		if profiles[i].Spec.Realtime != nil {
			names = append(names, profiles[i].Name)
		}
	}
	return names
}

// threadSettingPrefix starts the setting of a pod thread's scheduling
// policy in a LatencyNode's status (agent/rtsched.PodID, then
// "/<tid>@<start time>" per thread).
const threadSettingPrefix = "rtsched/"

// threadsHeld lists the LatencyNodes whose agent still holds thread
// policies it set and has not restored (status.heldThreads, counted from
// its journal): restoring them calls sched_setattr too, so hostPID must
// outlast a realtime grant until every agent reported them restored.
// Without this, removing spec.realtime would withdraw hostPID while the
// agent restores. The settings list is capped (256) and a tenant's Refused
// entries can fill it, so it only adds to the count: an agent that predates
// heldThreads still reports threads there (Applied, or Failed restores).
func threadsHeld(nodes []v1alpha1.LatencyNode) []string {
	var names []string
	for i := range nodes {
		if holdsThreads(&nodes[i]) {
			names = append(names, nodes[i].Name)
		}
	}
	return names
}

func holdsThreads(ln *v1alpha1.LatencyNode) bool {
	if ln.Status.HeldThreads > 0 {
		return true
	}
	for _, s := range ln.Status.Settings {
		if strings.HasPrefix(s.Setting, threadSettingPrefix) && strings.Contains(s.Setting, "@") &&
			(s.State == v1alpha1.SettingApplied || s.State == v1alpha1.SettingFailed) {
			return true
		}
	}
	return false
}

// renderAgentDaemonSet is the agent DaemonSet the controller keeps in place.
// It is a pure function of the options and of whether a profile grants
// realtime (hostPID, see agentPodSpec); every privilege it grants is
// commented with the reason the agent needs it.
func renderAgentDaemonSet(o agentOptions, realtime bool) *appsv1.DaemonSet {
	lbls := agentSelectorLabels()
	return &appsv1.DaemonSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      agentDaemonSetName,
			Namespace: o.Namespace,
			Labels:    lbls,
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type: appsv1.RollingUpdateDaemonSetStrategyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbls},
				Spec:       agentPodSpec(o, realtime),
			},
		},
	}
}

func agentPodSpec(o agentOptions, realtime bool) corev1.PodSpec {
	return corev1.PodSpec{
		ServiceAccountName: agentServiceAccountName,
		// The agent is what keeps a latency node tuned and measured; it must
		// not be the pod evicted first under pressure.
		PriorityClassName: "system-node-critical",
		// hostPID only while a LatencyProfile grants realtime (spec.realtime,
		// also while such a profile is being deleted and reverted) or an
		// agent still reports thread policies to restore (threadsHeld).
		// Everything else the agent knows about processes (schedstat of
		// every task for the measurement fallback, RT tasks on isolated
		// CPUs, irqbalance's pid and environment) it reads under the host
		// root's /proc: the host's own procfs, bind-mounted with "/", which
		// lists the host's pid namespace whatever namespace the reader is
		// in (agent/measure/pidns_privileged_test.go). The eBPF programs see
		// kernel pids, and those are only map keys. But sched_setattr, which
		// sets SCHED_FIFO/RR on a granted pod's threads and restores them on
		// revert, names a thread by its tid in the caller's pid namespace,
		// and no process can enter the host's pid namespace from a child
		// one (setns: EINVAL), so agent/rtsched needs the host's namespace
		// itself and reports Unsupported without it. Sharing it lets every
		// process on the node see and signal the agent, and the agent see
		// theirs through its own /proc: granted only while realtime is.
		HostPID: realtime,
		// hostNetwork: the clusters this runs on schedule only host-network
		// pods, and the agent needs no pod network of its own.
		HostNetwork: true,
		DNSPolicy:   corev1.DNSClusterFirstWithHostNet,
		// Run only on nodes a LatencyProfile owns.
		Affinity:    profileNodeAffinity(),
		Tolerations: agentTolerations(),
		Containers:  []corev1.Container{agentContainer(o)},
		Volumes: []corev1.Volume{{
			// The host root: /proc/sys, /proc/irq, /sys/fs/cgroup,
			// /sys/kernel/debug/sched, /var/lib/kubelet and the journal in
			// /var/lib/latencytier are all reached under it.
			Name: "host-root",
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: "/", Type: ptr.To(corev1.HostPathDirectory),
			}},
		}, {
			// The cluster admin's sysctl unlock, read on every pass: the
			// agent applies a raw sysctl off the built-in allowlist only
			// when this lists it, whatever its LatencyNode says. Optional:
			// without the ConfigMap the pod starts and nothing is unlocked.
			// kubelet fetches it (the node may read what its pods mount):
			// the agent's role grants no ConfigMap access.
			Name: "allowed-sysctls",
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: knobs.AdminConfigMap},
				Optional:             ptr.To(true),
			}},
		}},
		TerminationGracePeriodSeconds: ptr.To[int64](30),
	}
}

func agentContainer(o agentOptions) corev1.Container {
	args := []string{"agent", "--node-name=$(NODE_NAME)", "--host-root=" + hostRootMountPath,
		"--allowed-sysctls-file=" + path.Join(allowedSysctlsDir, knobs.AdminKey)}
	var ports []corev1.ContainerPort
	if o.MetricsPort > 0 {
		// HTTPS metrics, served only to tokens the API server authenticates
		// and allows get on /metrics (the agent's default --metrics-secure).
		// The pod is on the host network, so the port is the node's.
		args = append(args, fmt.Sprintf("--metrics-bind-address=:%d", o.MetricsPort))
		ports = []corev1.ContainerPort{{Name: agentMetricsPortName, ContainerPort: o.MetricsPort,
			HostPort: o.MetricsPort, Protocol: corev1.ProtocolTCP}}
	}
	args = append(args, o.Args...)
	return corev1.Container{
		Name:  agentContainerName,
		Image: o.Image,
		// IfNotPresent: images may be imported on the node, without a registry.
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            args,
		Ports:           ports,
		Env: []corev1.EnvVar{{
			// The agent watches and reports only its own LatencyNode, named
			// after the node it runs on.
			Name: "NODE_NAME",
			ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
				APIVersion: "v1", FieldPath: "spec.nodeName",
			}},
		}},
		SecurityContext: &corev1.SecurityContext{
			// privileged: writing /proc/sys and /proc/irq/*/smp_affinity_list,
			// mounting debugfs for the scheduler knobs, moving cgroups, and
			// loading eBPF programs on the sched tracepoints all need full
			// capabilities and an unconfined view of /proc and /sys.
			Privileged: ptr.To(true),
			// runAsUser 0: the host files it tunes are owned by root.
			RunAsUser: ptr.To[int64](0),
		},
		// Requests so the scheduler counts the agent on a node it keeps
		// tuned; a memory limit so a leak is the agent's own OOM kill
		// (its journal is crash-safe) and not node memory pressure. No CPU
		// limit: CFS quota throttling is what the agent exists to remove.
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("20m"),
				corev1.ResourceMemory: resource.MustParse("64Mi"),
			},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		VolumeMounts: []corev1.VolumeMount{{
			Name:      "host-root",
			MountPath: hostRootMountPath,
			// HostToContainer: cgroup and debugfs mounts made on the host
			// after the pod started are visible to the agent.
			MountPropagation: ptr.To(corev1.MountPropagationHostToContainer),
		}, {
			Name: "allowed-sysctls", MountPath: allowedSysctlsDir, ReadOnly: true,
		}},
	}
}

// profileNodeAffinity places the agent on nodes carrying the profile label.
func profileNodeAffinity() *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: v1alpha1.ProfileLabel, Operator: corev1.NodeSelectorOpExists,
				}},
			}},
		},
	}}
}

// agentTolerations let the agent run on latency nodes whatever taints keep
// ordinary workloads off them, and stay through NotReady so it can revert.
func agentTolerations() []corev1.Toleration {
	return []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
}

// daemonSetDrifted reports whether actual no longer carries what desired
// sets. Fields desired leaves unset (server defaults) are ignored, except the
// nodeSelector, which the server never sets; the lists of the pod spec must
// have the same length, so an added volume, container,
// env var or argument counts as drift (DeepDerivative alone allows extras).
func daemonSetDrifted(desired, actual *appsv1.DaemonSet) bool {
	if !equality.Semantic.DeepDerivative(desired.Labels, actual.Labels) {
		return true
	}
	if !sameListLengths(&desired.Spec.Template.Spec, &actual.Spec.Template.Spec) {
		return true
	}
	// The server never defaults a nodeSelector; an added one keeps the agent
	// off latency nodes (no tuning held, no revert answered).
	if !maps.Equal(desired.Spec.Template.Spec.NodeSelector, actual.Spec.Template.Spec.NodeSelector) {
		return true
	}
	return !equality.Semantic.DeepDerivative(desired.Spec, actual.Spec)
}

// sameListLengths compares the lengths of the pod spec's lists.
func sameListLengths(a, b *corev1.PodSpec) bool {
	if len(a.Containers) != len(b.Containers) || len(a.InitContainers) != len(b.InitContainers) ||
		len(a.Volumes) != len(b.Volumes) || len(a.Tolerations) != len(b.Tolerations) {
		return false
	}
	for i := range a.Containers {
		x, y := &a.Containers[i], &b.Containers[i]
		if len(x.Args) != len(y.Args) || len(x.Command) != len(y.Command) || len(x.Env) != len(y.Env) ||
			len(x.EnvFrom) != len(y.EnvFrom) || len(x.VolumeMounts) != len(y.VolumeMounts) {
			return false
		}
	}
	return true
}

// repairedDaemonSet is actual with desired's labels and spec put back, keeping
// actual's metadata (resourceVersion, foreign labels and annotations).
func repairedDaemonSet(desired, actual *appsv1.DaemonSet) *appsv1.DaemonSet {
	out := actual.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range desired.Labels {
		out.Labels[k] = v
	}
	out.Spec = *desired.Spec.DeepCopy()
	return out
}
