package charts

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// renders are the value sets the install tests render: the defaults, the
// config/default layout, every value set, and one manager replica (as
// hack/local-cluster installs it).
var renders = map[string][]string{
	"defaults":           {"-n", "tier"},
	"config/default":     configDefaultLayout,
	"everything-on.yaml": {"-n", "default", "-f", "testdata/everything-on.yaml"},
	"one replica":        {"-n", "tier", "--set", "manager.replicas=1", "--set", "manager.hostNetwork=true"},
}

// decode strictly decodes a rendered object into out.
func decode(t *testing.T, key string, obj map[string]any, out any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(mustYAML(t, obj), out); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// podTemplates returns the pod spec of every object of a rendered stream
// that makes pods (Deployment, DaemonSet, StatefulSet, Job, CronJob, Pod),
// hooks included, keyed as objects keys them. An object of another kind
// with a spec.template fails the test: a new workload kind must be named
// here to be checked.
func podTemplates(t *testing.T, objs map[string]map[string]any) map[string]corev1.PodSpec {
	t.Helper()
	out := map[string]corev1.PodSpec{}
	for key, obj := range objs {
		switch obj["kind"] {
		case "Deployment":
			var d appsv1.Deployment
			decode(t, key, obj, &d)
			out[key] = d.Spec.Template.Spec
		case "DaemonSet":
			var d appsv1.DaemonSet
			decode(t, key, obj, &d)
			out[key] = d.Spec.Template.Spec
		case "StatefulSet":
			var s appsv1.StatefulSet
			decode(t, key, obj, &s)
			out[key] = s.Spec.Template.Spec
		case "Job":
			var j batchv1.Job
			decode(t, key, obj, &j)
			out[key] = j.Spec.Template.Spec
		case "CronJob":
			var c batchv1.CronJob
			decode(t, key, obj, &c)
			out[key] = c.Spec.JobTemplate.Spec.Template.Spec
		case "Pod":
			var p corev1.Pod
			decode(t, key, obj, &p)
			out[key] = p.Spec
		default:
			if spec, ok := obj["spec"].(map[string]any); ok && spec["template"] != nil {
				t.Errorf("%s: a pod template in a kind podTemplates does not know", key)
			}
		}
	}
	return out
}

// TestChartEveryPodHasRequests: every container of every pod the chart
// creates, hooks included, requests CPU and memory, so the scheduler
// counts it and a namespace whose LimitRange or ResourceQuota requires
// requests admits it. The uninstall hook's Job had none, so helm uninstall
// failed in such a namespace.
func TestChartEveryPodHasRequests(t *testing.T) {
	for name, args := range renders {
		objs := objects(t, "helm template", helm(t, append([]string{"template", "rel", chartDir, "--kube-version", kubeVersion}, args...)...))
		pods := podTemplates(t, objs)
		for _, want := range []string{"Deployment/", "DaemonSet/", "Job/"} {
			if !slices.ContainsFunc(slices.Collect(mapKeys(pods)), func(k string) bool { return strings.HasPrefix(k, want) }) {
				t.Errorf("%s: no %s rendered: %v", name, want, keys(objs))
			}
		}
		for key, spec := range pods {
			for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
				r := c.Resources.Requests
				if r.Cpu().IsZero() || r.Memory().IsZero() {
					t.Errorf("%s: %s container %s requests %v, want cpu and memory", name, key, c.Name, r)
				}
			}
		}
	}
}

// TestChartManagerReplicasAndPDB: by default two manager replicas under
// leader election, spread over nodes by a preferred (never required)
// anti-affinity, so a one-node cluster still runs both, and a
// PodDisruptionBudget that selects exactly the manager's pods and lets one
// go at a time. One replica renders no PDB (it would block every drain);
// several without leader election do not render at all.
func TestChartManagerReplicasAndPDB(t *testing.T) {
	for name, c := range map[string]struct {
		args     []string
		replicas int32
	}{
		"defaults":   {nil, 2},
		"three":      {[]string{"--set", "manager.replicas=3"}, 3},
		"one":        {[]string{"--set", "manager.replicas=1"}, 1},
		"hostNet, 1": {[]string{"--set", "manager.replicas=1", "--set", "manager.hostNetwork=true"}, 1},
	} {
		objs := objects(t, "helm template", helm(t, append([]string{"template", "rel", chartDir, "-n", "tier"}, c.args...)...))
		var dep appsv1.Deployment
		decode(t, "manager", objs["Deployment/tier/latencytier-manager"], &dep)
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != c.replicas {
			t.Errorf("%s: replicas %v, want %d", name, dep.Spec.Replicas, c.replicas)
		}
		if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--leader-elect") {
			t.Errorf("%s: manager args %v lack --leader-elect", name, dep.Spec.Template.Spec.Containers[0].Args)
		}
		aff := dep.Spec.Template.Spec.Affinity
		if aff == nil || aff.PodAntiAffinity == nil || len(aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0 ||
			len(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Errorf("%s: manager affinity %+v, want one preferred pod anti-affinity term and no required one", name, aff)
		} else {
			term := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
			sel, err := metav1LabelSelector(term.LabelSelector)
			if err != nil || term.TopologyKey != "kubernetes.io/hostname" || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
				t.Errorf("%s: anti-affinity term %+v does not spread the manager's own pods over hostnames (%v)", name, term, err)
			}
		}

		obj, ok := objs["PodDisruptionBudget/tier/latencytier-manager"]
		if c.replicas <= 1 {
			if ok {
				t.Errorf("%s: a PodDisruptionBudget with %d replica: it would block every drain", name, c.replicas)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: no PodDisruptionBudget with %d replicas", name, c.replicas)
			continue
		}
		var pdb policyv1.PodDisruptionBudget
		decode(t, "pdb", obj, &pdb)
		sel, err := metav1LabelSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
			t.Errorf("%s: PDB selector %v does not select the manager's pods %v (%v)", name, pdb.Spec.Selector, dep.Spec.Template.Labels, err)
		}
		for key, o := range objs {
			if strings.HasPrefix(key, "DaemonSet/") {
				var ds appsv1.DaemonSet
				decode(t, key, o, &ds)
				if sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
					t.Errorf("%s: PDB selector %v also selects %s's pods", name, pdb.Spec.Selector, key)
				}
			}
		}
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
			t.Errorf("%s: PDB maxUnavailable %v minAvailable %v, want maxUnavailable 1", name, pdb.Spec.MaxUnavailable, pdb.Spec.MinAvailable)
		}
	}
	if out := helmFails(t, "template", "rel", chartDir, "-n", "tier", "--set", "manager.leaderElect=false"); !strings.Contains(out, "needs manager.leaderElect") {
		t.Errorf("two replicas without leader election:\n%s", out)
	}
}

// TestChartNetworkPolicy: off by default (it needs a CNI that enforces
// it); on, it selects the manager's and the uninstall hook's pods and no
// agent's, and admits ingress only on the metrics port, from metricsFrom
// when given, and none with metrics off.
func TestChartNetworkPolicy(t *testing.T) {
	if _, ok := objects(t, "helm template", helm(t, "template", "rel", chartDir, "-n", "tier"))["NetworkPolicy/tier/latencytier-manager"]; ok {
		t.Error("a NetworkPolicy by default; want it opt-in")
	}
	from := `[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`
	for name, c := range map[string]struct {
		args  []string
		ports []int
		peers int
	}{
		"any source":  {nil, []int{9847}, 0},
		"metricsFrom": {[]string{"--set-json", "networkPolicy.metricsFrom=" + from}, []int{9847}, 1},
		"other port":  {[]string{"--set", "metrics.port=19847"}, []int{19847}, 0},
		"no metrics":  {[]string{"--set", "metrics.port=0"}, nil, 0},
	} {
		objs := objects(t, "helm template", helm(t, append([]string{"template", "rel", chartDir, "-n", "tier", "--set", "networkPolicy.enabled=true"}, c.args...)...))
		var np networkingv1.NetworkPolicy
		decode(t, "networkpolicy", objs["NetworkPolicy/tier/latencytier-manager"], &np)
		sel, err := metav1LabelSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		for key, spec := range podTemplates(t, objs) {
			lbls := podLabels(t, key, objs[key])
			want := !spec.HostNetwork // the manager and the hook; the agents are on the host network
			if got := sel.Matches(labels.Set(lbls)); got != want {
				t.Errorf("%s: NetworkPolicy selects %s (%v): %v, want %v", name, key, lbls, got, want)
			}
		}
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("%s: policyTypes %v, want Ingress only", name, np.Spec.PolicyTypes)
		}
		var ports []int
		peers := 0
		for _, r := range np.Spec.Ingress {
			peers += len(r.From)
			for _, p := range r.Ports {
				ports = append(ports, p.Port.IntValue())
			}
		}
		if (len(c.ports) == 0 && len(np.Spec.Ingress) != 0) || !slices.Equal(ports, c.ports) || peers != c.peers {
			t.Errorf("%s: ingress %+v, want ports %v from %d peers", name, np.Spec.Ingress, c.ports, c.peers)
		}
	}
}

// podLabels are the labels of a workload's pod template.
func podLabels(t *testing.T, key string, obj map[string]any) map[string]string {
	t.Helper()
	var o struct {
		Spec struct {
			Template struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(mustYAML(t, obj), &o); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return o.Spec.Template.Metadata.Labels
}

// scc is the part of security.openshift.io/v1 SecurityContextConstraints
// the chart renders (OpenShift's API is not in go.mod).
type scc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Priority                 *int32   `json:"priority"`
	AllowPrivilegedContainer bool     `json:"allowPrivilegedContainer"`
	AllowPrivilegeEscalation *bool    `json:"allowPrivilegeEscalation"`
	AllowHostNetwork         bool     `json:"allowHostNetwork"`
	AllowHostPorts           bool     `json:"allowHostPorts"`
	AllowHostPID             bool     `json:"allowHostPID"`
	AllowHostIPC             bool     `json:"allowHostIPC"`
	AllowHostDirVolumePlugin bool     `json:"allowHostDirVolumePlugin"`
	ReadOnlyRootFilesystem   bool     `json:"readOnlyRootFilesystem"`
	DefaultAddCapabilities   []string `json:"defaultAddCapabilities"`
	AllowedCapabilities      []string `json:"allowedCapabilities"`
	RequiredDropCapabilities []string `json:"requiredDropCapabilities"`
	RunAsUser                struct {
		Type string `json:"type"`
	} `json:"runAsUser"`
	SELinuxContext struct {
		Type string `json:"type"`
	} `json:"seLinuxContext"`
	FSGroup struct {
		Type string `json:"type"`
	} `json:"fsGroup"`
	SupplementalGroups struct {
		Type string `json:"type"`
	} `json:"supplementalGroups"`
	SeccompProfiles []string `json:"seccompProfiles"`
	Volumes         []string `json:"volumes"`
	Users           []string `json:"users"`
	Groups          []string `json:"groups"`
}

// TestChartOpenShiftSCC: off by default; on, SCC latencytier-agent allows
// what the rendered agent DaemonSets ask and no more (not privileged, no
// host IPC, exactly their added capabilities, their volume types), only
// the agent's service account may use it, and the manager and the
// uninstall hook may use nonroot-v2.
func TestChartOpenShiftSCC(t *testing.T) {
	if _, ok := objects(t, "helm template", helm(t, "template", "rel", chartDir, "-n", "tier"))["SecurityContextConstraints/latencytier-agent"]; ok {
		t.Error("an SCC by default; want it opt-in")
	}
	objs := objects(t, "helm template", helm(t, "template", "rel", chartDir, "-n", "tier", "--set", "openshift.securityContextConstraints.enabled=true"))
	obj, ok := objs["SecurityContextConstraints/latencytier-agent"]
	if !ok {
		t.Fatalf("no SCC latencytier-agent: %v", keys(objs))
	}
	var s scc
	if err := yaml.UnmarshalStrict(mustYAML(t, obj), &s); err != nil {
		t.Fatalf("SCC: %v", err)
	}
	if s.APIVersion != "security.openshift.io/v1" || s.AllowPrivilegedContainer || s.AllowHostIPC || len(s.Users) != 0 || len(s.Groups) != 0 {
		t.Errorf("SCC %+v: want security.openshift.io/v1, not privileged, no host IPC, no users or groups (RBAC use instead)", s)
	}
	var caps, volumes []string
	hostPID, hostNet := false, false
	for key, ds := range agentDaemonSets(t, "scc", helm(t, "template", "rel", chartDir, "-n", "tier")) {
		spec := ds.Spec.Template.Spec
		hostPID = hostPID || spec.HostPID
		hostNet = hostNet || spec.HostNetwork
		for _, c := range spec.Containers {
			if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
				t.Fatalf("%s: container %s has no capabilities", key, c.Name)
			}
			for _, a := range c.SecurityContext.Capabilities.Add {
				caps = append(caps, string(a))
			}
		}
		for _, v := range spec.Volumes {
			switch {
			case v.HostPath != nil:
				volumes = append(volumes, "hostPath")
			case v.ConfigMap != nil:
				volumes = append(volumes, "configMap")
			case v.Secret != nil:
				volumes = append(volumes, "secret")
			case v.Projected != nil:
				volumes = append(volumes, "projected")
			case v.EmptyDir != nil:
				volumes = append(volumes, "emptyDir")
			case v.DownwardAPI != nil:
				volumes = append(volumes, "downwardAPI")
			default:
				t.Errorf("%s: volume %s of a type this test does not map to an SCC volume", key, v.Name)
			}
		}
	}
	volumes = append(volumes, "projected") // the service account token
	slices.Sort(caps)
	caps = slices.Compact(caps)
	allowed := slices.Sorted(slices.Values(s.AllowedCapabilities))
	if !slices.Equal(allowed, caps) {
		t.Errorf("SCC allowedCapabilities %v, the agents add %v", allowed, caps)
	}
	if s.AllowHostPID != hostPID || s.AllowHostNetwork != hostNet || !s.AllowHostPorts || !s.AllowHostDirVolumePlugin {
		t.Errorf("SCC hostPID %v hostNetwork %v hostPorts %v hostPath %v; the agents: hostPID %v hostNetwork %v",
			s.AllowHostPID, s.AllowHostNetwork, s.AllowHostPorts, s.AllowHostDirVolumePlugin, hostPID, hostNet)
	}
	for _, v := range volumes {
		if !slices.Contains(s.Volumes, v) {
			t.Errorf("SCC volumes %v lack %s, which the agents mount", s.Volumes, v)
		}
	}
	if !slices.Contains(s.SeccompProfiles, "runtime/default") {
		t.Errorf("SCC seccompProfiles %v lack runtime/default", s.SeccompProfiles)
	}

	// Who may use which SCC: RBAC use, bound in the release namespace.
	uses := map[string][]string{} // SCC name -> service accounts
	for key, o := range objs {
		if !strings.HasPrefix(key, "RoleBinding/tier/") {
			continue
		}
		var rb struct {
			RoleRef  struct{ Kind, Name string } `json:"roleRef"`
			Subjects []struct{ Kind, Name, Namespace string }
		}
		if err := yaml.Unmarshal(mustYAML(t, o), &rb); err != nil {
			t.Fatal(err)
		}
		role, ok := objs[rb.RoleRef.Kind+"/"+rb.RoleRef.Name]
		if !ok {
			continue
		}
		var cr struct {
			Rules []struct {
				APIGroups, Resources, ResourceNames, Verbs []string
			}
		}
		if err := yaml.Unmarshal(mustYAML(t, role), &cr); err != nil {
			t.Fatal(err)
		}
		for _, r := range cr.Rules {
			if slices.Contains(r.APIGroups, "security.openshift.io") && slices.Contains(r.Verbs, "use") {
				for _, n := range r.ResourceNames {
					for _, sub := range rb.Subjects {
						uses[n] = append(uses[n], sub.Namespace+"/"+sub.Name)
					}
				}
			}
		}
	}
	for n, want := range map[string][]string{
		"latencytier-agent": {"tier/latencytier-agent"},
		"nonroot-v2":        {"tier/latencytier-manager", "tier/latencytier-uninstall"},
	} {
		got := slices.Sorted(slices.Values(uses[n]))
		if !slices.Equal(got, want) {
			t.Errorf("SCC %s usable by %v, want %v", n, got, want)
		}
	}
}

// metav1LabelSelector converts a label selector for matching.
func metav1LabelSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(s)
}
