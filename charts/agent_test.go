package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/api/v1alpha1"
)

// keptCapabilities are the agent's only capabilities, each with the call
// that needs it: agent/captest removes each on the real kernel and shows its
// call fail (and that BPF and PERFMON add nothing beside SYS_ADMIN); the
// real-cluster e2e, hack/e2e.sh, runs the agent with exactly these.
var keptCapabilities = map[corev1.Capability]string{
	"SYS_ADMIN":  "mount debugfs for the scheduler's debug knobs; the kernel also takes it for BPF and PERFMON (the eBPF programs)",
	"SYS_NICE":   "sched_setattr on other processes' threads (realtime grants and their restore)",
	"SYS_PTRACE": "read /proc/<pid>/exe and root of processes with more capabilities (irqbalance, the host's init)",
	"SYSLOG":     "read the kernel log (RT throttling) with syslog(2), without /dev/kmsg, under dmesg_restrict=1",
}

// hostPaths are the only host paths the agent mounts, and whether it may
// write there.
var hostPaths = map[string]bool{
	"/proc":                true,  // sysctls, IRQ affinity
	"/sys":                 true,  // cgroups, PM QoS, cpuidle, debugfs
	"/var/lib/latencytier": true,  // its journal
	"/var/lib/kubelet":     false, // the CPU manager's state
	"/run/systemd":         false, // systemd's private D-Bus socket (connect needs no write)
	"/usr":                 false, // the host's irqbalance binaries
	"/etc/default":         false, // GRUB's defaults: the backend, others' arguments
	"/etc/default/grub.d":  true,  // the agent's staged boot arguments drop-in
	"/etc/kernel":          true,  // systemd-boot: the arguments appended to /etc/kernel/cmdline
	"/boot":                false, // the generated grub.cfg, checked and compared
	"/var/run/nri":         false, // the runtime's NRI socket (NRI mode; connect needs no write)
}

// agentDaemonSets decodes the two agent DaemonSets of a rendered stream.
func agentDaemonSets(t *testing.T, what string, stream []byte) map[string]*appsv1.DaemonSet {
	t.Helper()
	out := map[string]*appsv1.DaemonSet{}
	for key, obj := range objects(t, what, stream) {
		if !strings.HasPrefix(key, "DaemonSet/") {
			continue
		}
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		ds := &appsv1.DaemonSet{}
		if err := yaml.UnmarshalStrict(b, ds); err != nil {
			t.Fatalf("%s: %s: %v", what, key, err)
		}
		out[ds.Name] = ds
	}
	if len(out) != 2 || out["latencytier-agent"] == nil || out["latencytier-agent-hostpid"] == nil {
		t.Fatalf("%s: want DaemonSets latencytier-agent and latencytier-agent-hostpid, got %v", what, slices.Collect(mapKeys(out)))
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestAgentDaemonSetsLeastPrivilege: the agent is not privileged; it has
// exactly keptCapabilities, a read-only root filesystem, seccomp, only the
// host paths it needs (read only where it only reads, never the host's
// "/"), no toleration of every taint, probes, and it runs only where the
// manager's agent label names its variant; only the hostpid variant
// shares the host's pid namespace. Each of these failed against the
// DaemonSet the manager used to render (privileged, "/" read-write,
// tolerate-all, Exists on the profile label, no probes).
func TestAgentDaemonSetsLeastPrivilege(t *testing.T) {
	dss := agentDaemonSets(t, "kustomize build config/default", kustomize(t, filepath.Join("..", "config", "default")))
	for name, ds := range dss {
		variant := v1alpha1.AgentStandard
		if name == "latencytier-agent-hostpid" {
			variant = v1alpha1.AgentHostPID
		}
		pod := &ds.Spec.Template.Spec
		if pod.HostPID != (variant == v1alpha1.AgentHostPID) {
			t.Errorf("%s: hostPID %v", name, pod.HostPID)
		}
		if pod.SecurityContext == nil || pod.SecurityContext.SeccompProfile == nil ||
			pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: no RuntimeDefault seccomp profile", name)
		}
		if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
			t.Fatalf("%s: want one container", name)
		}
		c := &pod.Containers[0]
		sc := c.SecurityContext
		if sc == nil || sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s: privileged", name)
		}
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: root filesystem not read-only", name)
		}
		if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: does not drop ALL capabilities", name)
		} else {
			var got []string
			for _, c := range sc.Capabilities.Add {
				got = append(got, string(c))
				if _, ok := keptCapabilities[c]; !ok {
					t.Errorf("%s: capability %s added, not among the kept ones", name, c)
				}
			}
			if len(sc.Capabilities.Add) != len(keptCapabilities) {
				t.Errorf("%s: capabilities %v, want exactly %d", name, got, len(keptCapabilities))
			}
		}
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			mounts[m.Name] = m
		}
		seen := map[string]bool{}
		for _, v := range pod.Volumes {
			if v.HostPath == nil {
				continue
			}
			p := filepath.Clean(v.HostPath.Path)
			write, ok := hostPaths[p]
			if !ok {
				t.Errorf("%s: host path %s mounted, not among the needed ones", name, p)
				continue
			}
			seen[p] = true
			m, ok := mounts[v.Name]
			if !ok {
				t.Errorf("%s: volume %s not mounted", name, v.Name)
				continue
			}
			if m.ReadOnly == write {
				t.Errorf("%s: %s mounted readOnly=%v, the agent %s", name, p, m.ReadOnly, map[bool]string{true: "writes there", false: "only reads there"}[write])
			}
			if want := "/host" + p; m.MountPath != want {
				t.Errorf("%s: %s mounted at %s, want %s (the agent's --host-root=/host)", name, p, m.MountPath, want)
			}
		}
		if len(seen) != len(hostPaths) {
			t.Errorf("%s: host paths %v, want %d", name, seen, len(hostPaths))
		}
		for _, tol := range pod.Tolerations {
			if tol.Key == "" && tol.Operator == corev1.TolerationOpExists {
				t.Errorf("%s: tolerates every taint", name)
			}
		}
		if !requiresAgentLabel(pod.Affinity, variant) {
			t.Errorf("%s: affinity %+v does not require %s=%s", name, pod.Affinity, v1alpha1.AgentLabel, variant)
		}
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Host != "127.0.0.1" {
				t.Errorf("%s: readiness and liveness must be HTTP probes on 127.0.0.1, got %+v", name, p)
			}
		}
	}
	// The two variants are one agent: they differ only where hostPID does.
	a, b := dss["latencytier-agent"].DeepCopy(), dss["latencytier-agent-hostpid"].DeepCopy()
	b.Name, b.Labels, b.Spec.Selector, b.Spec.Template.Labels = a.Name, a.Labels, a.Spec.Selector, a.Spec.Template.Labels
	b.Spec.Template.Spec.HostPID = false
	b.Spec.Template.Spec.Affinity = a.Spec.Template.Spec.Affinity
	if !reflect.DeepEqual(a, b) {
		t.Errorf("the agent DaemonSets differ beyond name, labels, placement and hostPID:\n%s", diffObjects(t, a, b))
	}
}

// requiresAgentLabel: the only required placement is the manager's agent
// label with exactly this variant as its value (not Exists: a node must
// not attract the agent with a label of its own).
func requiresAgentLabel(aff *corev1.Affinity, variant string) bool {
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return false
	}
	for _, term := range terms { // terms are ORed: each must require it
		ok := false
		for _, e := range term.MatchExpressions {
			if e.Key == v1alpha1.AgentLabel && e.Operator == corev1.NodeSelectorOpIn && slices.Equal(e.Values, []string{variant}) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func diffObjects(t *testing.T, want, got any) string {
	t.Helper()
	toMap := func(o any) map[string]any {
		b, _ := yaml.Marshal(o)
		var m map[string]any
		_ = yaml.Unmarshal(b, &m)
		return m
	}
	return diff(t, toMap(want), toMap(got))
}

// TestKustomizeImageOverrideReachesAgent: a kustomize images: override
// changes the agent's image too. It did not when the manager rendered the
// agent DaemonSet: --agent-image=latencytier:dev stayed, and agents would
// have pulled an image that does not exist.
func TestKustomizeImageOverrideReachesAgent(t *testing.T) {
	base, err := filepath.Abs(filepath.Join("..", "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, base) // kustomize takes no absolute base
	if err != nil {
		t.Fatal(err)
	}
	overlay := "resources:\n- " + rel + "\nimages:\n- name: latencytier\n  newName: registry.example/latencytier\n  newTag: v1.2.3\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	out := kustomize(t, dir)
	const want = "registry.example/latencytier:v1.2.3"
	for name, ds := range agentDaemonSets(t, "kustomize build overlay", out) {
		if got := ds.Spec.Template.Spec.Containers[0].Image; got != want {
			t.Errorf("%s: image %s, want %s", name, got, want)
		}
	}
	if strings.Contains(string(out), "latencytier:dev") {
		t.Errorf("latencytier:dev still referenced after the images: override")
	}
}

// TestChartAgentAffinity: agent.affinity narrows where both DaemonSets
// run and never widens it: each of the user's required node selector terms
// also requires the manager's agent label with the DaemonSet's variant
// (requiresAgentLabel), the user's own expressions and fields are kept,
// and preferred terms and pod anti-affinity pass through. The chart had no
// agent.affinity value.
func TestChartAgentAffinity(t *testing.T) {
	rendered := helm(t, "template", "latencytier", chartDir, "--kube-version", kubeVersion, "--set-json",
		`agent.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[`+
			`{"matchExpressions":[{"key":"pool","operator":"In","values":["latency"]}]},`+
			`{"matchFields":[{"key":"metadata.name","operator":"In","values":["worker-7"]}]}]},`+
			`"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":5,"preference":{"matchExpressions":[{"key":"fast","operator":"Exists"}]}}]},`+
			`"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"app":"noisy"}}}]}}`)
	for name, ds := range agentDaemonSets(t, "helm template", rendered) {
		variant := ds.Labels["latencytier.io/agent-variant"]
		aff := ds.Spec.Template.Spec.Affinity
		if !requiresAgentLabel(aff, variant) {
			t.Errorf("%s: the user's affinity dropped the required agent label %s=%s:\n%s", name, v1alpha1.AgentLabel, variant, mustYAML(t, aff))
			continue
		}
		own := corev1.NodeSelectorRequirement{Key: v1alpha1.AgentLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{variant}}
		want := &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"latency"}}, own}},
					{MatchExpressions: []corev1.NodeSelectorRequirement{own},
						MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"worker-7"}}}},
				}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 5,
					Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "fast", Operator: corev1.NodeSelectorOpExists}}}}},
			},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "noisy"}}}}},
		}
		if !reflect.DeepEqual(aff, want) {
			t.Errorf("%s: affinity:\n%s", name, diffObjects(t, want, aff))
		}
	}
}

// TestChartAgentExtraArgsQuoted: an extra argument YAML would read
// otherwise (a " #" starts a comment, ": " a map, a leading "*" an alias)
// reaches the container's args intact and last. Unquoted, '--x=a #b'
// became --x=a.
func TestChartAgentExtraArgsQuoted(t *testing.T) {
	extra := []string{"--x=a #b", "--y=k: v", "*z", `--q="it's"`}
	j, err := json.Marshal(extra)
	if err != nil {
		t.Fatal(err)
	}
	rendered := helm(t, "template", "latencytier", chartDir, "--kube-version", kubeVersion, "--set-json", "agent.extraArgs="+string(j))
	for name, ds := range agentDaemonSets(t, "helm template", rendered) {
		args := ds.Spec.Template.Spec.Containers[0].Args
		if len(args) < len(extra) || !slices.Equal(args[len(args)-len(extra):], extra) {
			t.Errorf("%s: args %q, want them to end with %q", name, args, extra)
		}
	}
}

// TestChartAgentValuesReachBothDaemonSets: every agent setting a user
// expects to set lands in both DaemonSets.
func TestChartAgentValuesReachBothDaemonSets(t *testing.T) {
	rendered := helm(t, "template", "latencytier", chartDir, "--kube-version", kubeVersion,
		"--set", "agent.image=registry.example/agent:v2", "--set", "agent.pullPolicy=Always",
		"--set", "agent.priorityClassName=latency-critical",
		"--set", "agent.resources.requests.cpu=50m", "--set", "agent.resources.limits.memory=512Mi",
		"--set", "agent.tolerations[0].key=dedicated", "--set", "agent.tolerations[0].operator=Equal",
		"--set", "agent.tolerations[0].value=latency", "--set", "agent.tolerations[0].effect=NoSchedule",
		"--set", "agent.nodeSelector.pool=latency", "--set", "imagePullSecrets[0].name=regcred",
		"--set", "agent.updateStrategy.rollingUpdate.maxUnavailable=10%", "--set", "agent.logLevel=2",
		"--set", "agent.extraArgs[0]=--resync=10s", "--set", "agent.metricsPort=19849",
		"--set", "agent.healthPort=19850", "--set", "agent.kubeletDir=/srv/kubelet", "--set", "agent.nriSocketDir=/srv/nri")
	for name, ds := range agentDaemonSets(t, "helm template", rendered) {
		pod := &ds.Spec.Template.Spec
		c := &pod.Containers[0]
		args := strings.Join(c.Args, " ")
		checks := map[string]bool{
			"image":             c.Image == "registry.example/agent:v2",
			"pullPolicy":        c.ImagePullPolicy == corev1.PullAlways,
			"priorityClassName": pod.PriorityClassName == "latency-critical",
			"resources":         c.Resources.Requests.Cpu().String() == "50m" && c.Resources.Limits.Memory().String() == "512Mi",
			"tolerations": len(pod.Tolerations) == 2 && pod.Tolerations[0].Key == "dedicated" && pod.Tolerations[0].Value == "latency" &&
				pod.Tolerations[1].Key == v1alpha1.TuningPendingTaint,
			"nodeSelector":     pod.NodeSelector["pool"] == "latency",
			"imagePullSecrets": len(pod.ImagePullSecrets) == 1 && pod.ImagePullSecrets[0].Name == "regcred",
			"updateStrategy": ds.Spec.UpdateStrategy.RollingUpdate != nil && ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable != nil &&
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String() == "10%",
			"logLevel":    strings.Contains(args, "--v=2"),
			"extraArgs":   strings.HasSuffix(args, "--resync=10s"),
			"metricsPort": strings.Contains(args, "--metrics-bind-address=:19849") && c.Ports[0].ContainerPort == 19849,
			"healthPort":  strings.Contains(args, "--health-probe-bind-address=127.0.0.1:19850") && c.ReadinessProbe.HTTPGet.Port.IntValue() == 19850,
			"kubeletDir":  slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.HostPath != nil && v.HostPath.Path == "/srv/kubelet" }),
			"nriSocketDir": slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
				return v.Name == "nri" && v.HostPath != nil && v.HostPath.Path == "/srv/nri"
			}),
		}
		for what, ok := range checks {
			if !ok {
				t.Errorf("%s: agent.%s not applied", name, what)
			}
		}
	}
}
