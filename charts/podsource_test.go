package charts

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// podsRule is the one rule agent.podSource: APIServer adds to the agent's
// ClusterRole (agent/loop/rbac_test.go runs the agent with it).
var podsRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}}

// agentRoleAndArgs renders the chart with args and returns the agent's
// ClusterRole and the --pod-source of both agent DaemonSets.
func agentRoleAndArgs(t *testing.T, args ...string) (rbacv1.ClusterRole, map[string]string) {
	t.Helper()
	rendered := helm(t, append([]string{"template", "latencytier", chartDir, "--kube-version", kubeVersion}, append(configDefaultLayout, args...)...)...)
	objs := objects(t, "helm template", rendered)
	var role rbacv1.ClusterRole
	decode(t, "ClusterRole/latencytier-agent", objs["ClusterRole/latencytier-agent"], &role)
	sources := map[string]string{}
	for name, ds := range agentDaemonSets(t, "helm template", rendered) {
		for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(a, "--pod-source="); ok {
				sources[name] = v
			}
		}
	}
	return role, sources
}

// podRules are the role's rules that grant anything on pods.
func podRules(role rbacv1.ClusterRole) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, "") && (slices.Contains(r.Resources, "pods") || slices.Contains(r.Resources, "*")) {
			out = append(out, r)
		}
	}
	return out
}

// TestChartAgentPodSource: by default (agent.podSource: Runtime) the
// agent's ClusterRole grants nothing on pods and both DaemonSets run
// --pod-source=Runtime; with APIServer the role gains exactly list and
// watch on pods, and nothing else changes in it; any other value is
// refused by the schema.
func TestChartAgentPodSource(t *testing.T) {
	runtime, rtArgs := agentRoleAndArgs(t)
	if rs := podRules(runtime); len(rs) > 0 {
		t.Errorf("default agent ClusterRole grants on pods: %+v; want nothing (agent.podSource: Runtime)", rs)
	}
	api, apiArgs := agentRoleAndArgs(t, "--set", "agent.podSource=APIServer")
	if rs := podRules(api); len(rs) != 1 || !slices.Equal(rs[0].Verbs, podsRule.Verbs) || !slices.Equal(rs[0].Resources, podsRule.Resources) {
		t.Errorf("APIServer agent ClusterRole's pod rules = %+v; want exactly %+v", rs, podsRule)
	}
	if got := slices.DeleteFunc(slices.Clone(api.Rules), func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "pods") }); len(got) != len(runtime.Rules) {
		t.Errorf("APIServer changed other rules of the agent's role: %d rules beside pods, Runtime has %d", len(got), len(runtime.Rules))
	}
	for want, args := range map[string]map[string]string{"Runtime": rtArgs, "APIServer": apiArgs} {
		if len(args) != 2 {
			t.Errorf("%s: --pod-source on %d agent DaemonSets (%v); want both", want, len(args), args)
		}
		for ds, got := range args {
			if got != want {
				t.Errorf("%s: DaemonSet %s runs --pod-source=%s", want, ds, got)
			}
		}
	}
	msg := helmFails(t, "template", "latencytier", chartDir, "--kube-version", kubeVersion, "--set", "agent.podSource=Kubelet")
	if !strings.Contains(msg, "podSource") {
		t.Errorf("agent.podSource=Kubelet refused without naming the value:\n%s", msg)
	}
}
