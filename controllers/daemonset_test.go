package controllers

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

var testAgent = agentOptions{Namespace: "latencytier-system", Image: "latencytier:test", Args: []string{"--resync=10s"}}

func TestRenderAgentDaemonSet(t *testing.T) {
	ds := renderAgentDaemonSet(testAgent, false)
	pod := ds.Spec.Template.Spec
	if ds.Namespace != testAgent.Namespace || ds.Name != agentDaemonSetName {
		t.Fatalf("object key = %s/%s", ds.Namespace, ds.Name)
	}
	// The agent reads processes through the host root's /proc, so without
	// a realtime grant it needs no share in the host's pid namespace.
	if pod.HostPID || !pod.HostNetwork || pod.HostIPC {
		t.Errorf("hostPID=%v hostIPC=%v hostNetwork=%v, want only hostNetwork", pod.HostPID, pod.HostIPC, pod.HostNetwork)
	}
	if pod.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName = %q", pod.PriorityClassName)
	}
	if pod.ServiceAccountName != agentServiceAccountName {
		t.Errorf("serviceAccountName = %q", pod.ServiceAccountName)
	}
	if len(pod.Tolerations) != 1 || pod.Tolerations[0].Operator != corev1.TolerationOpExists || pod.Tolerations[0].Key != "" {
		t.Errorf("tolerations = %+v, want tolerate everything", pod.Tolerations)
	}
	req := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
	if req.Key != v1alpha1.ProfileLabel || req.Operator != corev1.NodeSelectorOpExists {
		t.Errorf("node affinity = %+v, want %s Exists", req, v1alpha1.ProfileLabel)
	}
	c := pod.Containers[0]
	if c.Image != testAgent.Image || c.SecurityContext == nil || !*c.SecurityContext.Privileged {
		t.Errorf("container image=%q securityContext=%+v", c.Image, c.SecurityContext)
	}
	res := c.Resources
	if res.Requests.Cpu().IsZero() || res.Requests.Memory().IsZero() || res.Limits.Memory().IsZero() {
		t.Errorf("resources = %+v, want cpu and memory requests and a memory limit", res)
	}
	if _, ok := res.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("cpu limit %s: the agent must not be CFS-throttled", res.Limits.Cpu())
	}
	wantArgs := []string{"agent", "--node-name=$(NODE_NAME)", "--host-root=/host",
		"--allowed-sysctls-file=/etc/latencytier/sysctls/allowedSysctls", "--resync=10s"}
	if strings.Join(c.Args, " ") != strings.Join(wantArgs, " ") {
		t.Errorf("args = %q, want %q", c.Args, wantArgs)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("env = %+v, want NODE_NAME from spec.nodeName", c.Env)
	}
	if c.VolumeMounts[0].MountPath != hostRootMountPath || pod.Volumes[0].HostPath.Path != "/" {
		t.Errorf("host root mount = %+v / %+v", c.VolumeMounts, pod.Volumes)
	}
	// The admin's sysctl unlock: the ConfigMap the admission policy takes
	// as its parameter, optional (no ConfigMap: nothing unlocked), read-only.
	if len(pod.Volumes) != 2 || pod.Volumes[1].ConfigMap == nil || pod.Volumes[1].ConfigMap.Name != knobs.AdminConfigMap ||
		!*pod.Volumes[1].ConfigMap.Optional || len(c.VolumeMounts) != 2 || !c.VolumeMounts[1].ReadOnly ||
		c.VolumeMounts[1].Name != pod.Volumes[1].Name || c.VolumeMounts[1].MountPath+"/"+knobs.AdminKey != "/etc/latencytier/sysctls/allowedSysctls" {
		t.Errorf("allowed-sysctls volume = %+v / %+v", pod.Volumes, c.VolumeMounts)
	}
}

// TestAgentHostPIDOnlyForRealtime: hostPID is the one difference a realtime
// grant makes to the agent DaemonSet, and the drift check sees it both ways.
func TestAgentHostPIDOnlyForRealtime(t *testing.T) {
	without, with := renderAgentDaemonSet(testAgent, false), renderAgentDaemonSet(testAgent, true)
	if without.Spec.Template.Spec.HostPID || !with.Spec.Template.Spec.HostPID {
		t.Fatalf("hostPID = %v without realtime, %v with", without.Spec.Template.Spec.HostPID, with.Spec.Template.Spec.HostPID)
	}
	if !daemonSetDrifted(with, without) || !daemonSetDrifted(without, with) {
		t.Error("a hostPID flip is not seen as drift")
	}
	with.Spec.Template.Spec.HostPID = false
	if !equality.Semantic.DeepEqual(with, without) {
		t.Error("a realtime grant changes more than hostPID")
	}
}

func TestRealtimeGranted(t *testing.T) {
	rt := &v1alpha1.RealtimeSpec{NamespaceSelector: &v1alpha1.NamespaceSelector{}}
	profile := func(name string, r *v1alpha1.RealtimeSpec, deleting bool) v1alpha1.LatencyProfile {
		p := v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Spec.Realtime = r
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	cases := []struct {
		name     string
		profiles []v1alpha1.LatencyProfile
		want     []string
	}{
		{"no profiles", nil, nil},
		{"none grants", []v1alpha1.LatencyProfile{profile("a", nil, false), profile("b", nil, true)}, nil},
		{"one grants", []v1alpha1.LatencyProfile{profile("a", nil, false), profile("b", rt, false)}, []string{"b"}},
		// Its revert restores thread policies: hostPID until it is gone.
		{"granting one being deleted", []v1alpha1.LatencyProfile{profile("c", rt, true)}, []string{"c"}},
	}
	for _, tc := range cases {
		if got := realtimeGranted(tc.profiles); !slices.Equal(got, tc.want) {
			t.Errorf("%s: realtimeGranted = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := boundedNames([]string{"a", "b", "c", "d", "e"}); got != "a, b, c and 2 more" {
		t.Errorf("boundedNames = %q", got)
	}
}

func TestThreadsHeld(t *testing.T) {
	node := func(name string, rs ...v1alpha1.SettingResult) v1alpha1.LatencyNode {
		ln := v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		ln.Status.Settings = rs
		return ln
	}
	thread := func(state v1alpha1.SettingState) v1alpha1.SettingResult {
		return v1alpha1.SettingResult{Setting: "rtsched/ns/pod/uid/42@7", State: state}
	}
	nodes := []v1alpha1.LatencyNode{
		node("applied", thread(v1alpha1.SettingApplied)),
		node("restore-failed", thread(v1alpha1.SettingFailed)),
		node("conflict", thread(v1alpha1.SettingConflict)),
		// Pod-level results: a refusal, a namespace the agent cannot address.
		node("refused", v1alpha1.SettingResult{Setting: "rtsched/ns/pod/uid", State: v1alpha1.SettingRefused}),
		node("unsupported", v1alpha1.SettingResult{Setting: "rtsched", State: v1alpha1.SettingUnsupported}),
		node("other", v1alpha1.SettingResult{Setting: "sysctl/kernel.sched_rt_runtime_us", State: v1alpha1.SettingApplied}),
		node("none"),
	}
	// The agent counts held threads from its journal: a settings list full
	// of a tenant's refusals (capped at 256, the threads left out) does not
	// hide them.
	full := node("counted")
	for i := range 256 {
		full.Status.Settings = append(full.Status.Settings, v1alpha1.SettingResult{
			Setting: fmt.Sprintf("rtsched/tenant/pod-%03d/uid", i), State: v1alpha1.SettingRefused})
	}
	full.Status.SettingsOmitted, full.Status.HeldThreads = 40, 40
	nodes = append(nodes, full)
	if got, want := threadsHeld(nodes), []string{"applied", "restore-failed", "counted"}; !slices.Equal(got, want) {
		t.Errorf("threadsHeld = %v, want %v", got, want)
	}
	if got := hostPIDReasons([]string{"p"}, []string{"n"}); len(got) != 2 || !strings.Contains(got[1], "node n") {
		t.Errorf("hostPIDReasons = %q", got)
	}
}

// TestDaemonSetPrivilegesAreExplained reads the renderer's source: every
// privilege it grants sits under a comment saying why.
func TestDaemonSetPrivilegesAreExplained(t *testing.T) {
	src, err := os.ReadFile("daemonset.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	for _, field := range []string{"Privileged:", "HostPID:", "HostNetwork:", "RunAsUser:", "PriorityClassName:", "HostPath:", "Resources:"} {
		found := false
		for i, l := range lines {
			if !strings.Contains(l, field) {
				continue
			}
			found = true
			if !precededByComment(lines, i) {
				t.Errorf("%s (line %d) has no comment explaining it", field, i+1)
			}
		}
		if !found {
			t.Errorf("%s not found in daemonset.go", field)
		}
	}
}

// precededByComment reports whether a // comment is within the three lines
// above line i (a comment may explain a small block).
func precededByComment(lines []string, i int) bool {
	for j := i - 1; j >= 0 && j >= i-4; j-- {
		if strings.HasPrefix(strings.TrimSpace(lines[j]), "//") {
			return true
		}
	}
	return false
}

func TestDaemonSetDrifted(t *testing.T) {
	desired := renderAgentDaemonSet(testAgent, false)
	defaulted := func() *appsv1.DaemonSet {
		ds := renderAgentDaemonSet(testAgent, false)
		// What the API server adds must not count as drift.
		ds.ResourceVersion = "7"
		ds.Annotations = map[string]string{"deprecated.daemonset.template.generation": "1"}
		ds.Labels["someone/else"] = "x"
		ds.Spec.RevisionHistoryLimit = new(int32)
		ds.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
		ds.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
		ds.Spec.Template.Spec.SchedulerName = "default-scheduler"
		return ds
	}
	cases := []struct {
		name   string
		mutate func(*appsv1.DaemonSet)
		drift  bool
	}{
		{"server defaults", func(*appsv1.DaemonSet) {}, false},
		{"image changed", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Image = "evil:1" }, true},
		{"privileged dropped", func(ds *appsv1.DaemonSet) {
			f := false
			ds.Spec.Template.Spec.Containers[0].SecurityContext.Privileged = &f
		}, true},
		// hostPID without a realtime grant is taken away again.
		{"hostPID added", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostPID = true }, true},
		{"memory limit removed", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Resources.Limits = nil }, true},
		{"volume added", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Volumes = append(ds.Spec.Template.Spec.Volumes, corev1.Volume{Name: "x"})
		}, true},
		{"env added", func(ds *appsv1.DaemonSet) {
			c := &ds.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "X", Value: "1"})
		}, true},
		{"sidecar added", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, corev1.Container{Name: "s"})
		}, true},
		{"args changed", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Args = []string{"agent"} }, true},
		{"tolerations removed", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Tolerations = nil }, true},
		{"our label removed", func(ds *appsv1.DaemonSet) { delete(ds.Labels, agentAppLabel) }, true},
		// A nodeSelector (never defaulted by the server) keeps the agent off
		// latency nodes, so their tuning is neither held nor reverted.
		{"nodeSelector added", func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.NodeSelector = map[string]string{"only": "here"}
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			actual := defaulted()
			tc.mutate(actual)
			if got := daemonSetDrifted(desired, actual); got != tc.drift {
				t.Fatalf("drifted = %v, want %v", got, tc.drift)
			}
			if tc.drift && daemonSetDrifted(desired, repairedDaemonSet(desired, actual)) {
				t.Fatalf("repaired DaemonSet still drifted")
			}
		})
	}
}

// TestAgentDaemonSetServesMetricsToThePodMonitor: with a metrics port the
// agent is told to serve it and the pod exposes it under the name, and with
// the labels, that config/prometheus/podmonitor.yaml scrapes.
func TestAgentDaemonSetServesMetricsToThePodMonitor(t *testing.T) {
	o := testAgent
	o.MetricsPort = 9849
	ds := renderAgentDaemonSet(o, false)
	c := ds.Spec.Template.Spec.Containers[0]
	wantArgs := "agent --node-name=$(NODE_NAME) --host-root=/host --allowed-sysctls-file=/etc/latencytier/sysctls/allowedSysctls --metrics-bind-address=:9849 --resync=10s"
	if strings.Join(c.Args, " ") != wantArgs {
		t.Errorf("args = %q, want %q", c.Args, wantArgs)
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 9849 || c.Ports[0].HostPort != 9849 {
		t.Fatalf("ports = %+v, want 9849 on the node", c.Ports)
	}
	b, err := os.ReadFile("../config/prometheus/podmonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pm struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port string `json:"port"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	for _, doc := range strings.Split(string(b), "\n---") {
		if strings.Contains(doc, "kind: PodMonitor") {
			if err := yaml.Unmarshal([]byte(doc), &pm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(pm.Spec.Endpoints) != 1 || pm.Spec.Endpoints[0].Port != c.Ports[0].Name {
		t.Errorf("the PodMonitor scrapes ports %+v, the agent's is named %q", pm.Spec.Endpoints, c.Ports[0].Name)
	}
	for k, v := range pm.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("the PodMonitor selects %s=%s, the agent pod has %q", k, v, ds.Spec.Template.Labels[k])
		}
	}
	if len(pm.Spec.Selector.MatchLabels) == 0 {
		t.Error("no PodMonitor selector found")
	}
	if c := renderAgentDaemonSet(testAgent, false).Spec.Template.Spec.Containers[0]; len(c.Ports) != 0 {
		t.Errorf("metrics port 0 still exposes %+v", c.Ports)
	}
}
