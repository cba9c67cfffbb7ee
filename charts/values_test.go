package charts

import (
	"fmt"
	"strings"
	"testing"
)

// TestValuesSchemaRefusesBadValues: values.schema.json makes helm refuse
// what would otherwise render silently and fail later, or never: an
// unknown key at any level (a misspelling), a wrong type, a timeout that
// is not a Go duration (the manager and the uninstall command would exit
// on it after the install), a port out of range, an unknown pull policy.
// Each case rendered before the schema existed.
func TestValuesSchemaRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ set, says string }{
		{"bogus.value=1", "additional properties 'bogus' not allowed"},
		{"image.bogus=x", "additional properties 'bogus' not allowed"},
		{"agent.updateStrategy.rollingUpdate.bogus=1", "additional properties 'bogus' not allowed"},
		{"monitoring.podMonitor.bogus=true", "additional properties 'bogus' not allowed"},
		{"manager.resources.request.cpu=1", "additional properties 'request' not allowed"},
		{"agent.tolerations[0].keys=x", "additional properties 'keys' not allowed"},
		{"namespace.create=yes", "want boolean"},
		{"metrics.secure=1", "want boolean"},
		{"agent.logLevel=high", "want integer"},
		{"image.tag=12", "want string"},
		{"manager.nodeUnreachableTimeout=10", "want string"},
		{"manager.nodeUnreachableTimeout=ten minutes", "does not match pattern"},
		{"uninstall.timeout=15", "want string"},
		{"uninstall.timeout=15min", "does not match pattern"},
		{"monitoring.podMonitor.interval=often", "does not match pattern"},
		{"metrics.port=65536", "maximum"},
		{"metrics.port=-1", "minimum"},
		{"agent.metricsPort=70000", "maximum"},
		{"agent.healthPort=0", "minimum"},
		{"manager.healthProbePort=0", "minimum"},
		{"image.pullPolicy=Sometimes", "value must be one of"},
		{"agent.tolerations[0].operator=Maybe", "value must be one of"},
		{"namespace.name=Not_A_Namespace", "does not match pattern"},
		{"agent.kubeletDir=var/lib/kubelet", "does not match pattern"},
		{"agent.nriSocketDir=run/nri", "does not match pattern"},
		{"manager.maxRebooting=0", "minimum"},
		{"manager.maxRebooting=two", "want integer"},
		{"monitoring.prometheusRule.runbookBaseURL=docs/runbooks.md", "does not match pattern"},
		{"monitoring.prometheusRule.runbookBaseURL=https://x.example/runbooks.md#top", "does not match pattern"},
		{"monitoring.prometheusRule.runbookBaseURL=1", "want string"},
		{"manager.affinity=nodes", "want object"},
		{"agent.affinity=nodes", "want object"},
		{"manager.affinity.nodeAfinity.x=1", "additional properties 'nodeAfinity' not allowed"},
		{"agent.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution=pool", "want object"},
		{"agent.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution=x", "want array"},
		{"manager.podAnnotations=x", "want object"},
		{"manager.podAnnotations.team=1", "want string"},
		{"manager.priorityClassName=1", "want string"},
		{"manager.priorityClassName=Not_A_Name", "does not match pattern"},
		{"reboots.slots=17", "maximum"},
		{"reboots.slots=-1", "minimum"},
		{"reboots.slots=one", "want integer"},
		{"agent.controlPlaneNodes=Yes", "value must be one of"},
	} {
		out := helmFails(t, "template", "rel", chartDir, "--set", c.set)
		if !strings.Contains(out, "values don't meet the specifications of the schema") || !strings.Contains(out, c.says) {
			t.Errorf("--set %s: want a schema refusal saying %q, got:\n%s", c.set, c.says, out)
		}
	}
}

// TestValuesSchemaAcceptsGoodValues: the defaults, a values file that sets
// every value (testdata/everything-on.yaml), and the disabling zeros render.
func TestValuesSchemaAcceptsGoodValues(t *testing.T) {
	helm(t, "template", "rel", chartDir)
	helm(t, "template", "rel", chartDir, "-n", "default", "-f", "testdata/everything-on.yaml")
	helm(t, "template", "rel", chartDir, "--set", "metrics.port=0", "--set", "agent.metricsPort=0",
		"--set", "manager.nodeUnreachableTimeout=90s", "--set", "uninstall.timeout=1h30m",
		"--set", "agent.extraArgs=--resync=10s", "--set", "agent.updateStrategy.rollingUpdate.maxUnavailable=2")
}

// TestChartMaxRebooting: manager.maxRebooting reaches the manager's
// --max-rebooting (1 by default, as the flag's own default); the schema
// refuses 0 (TestValuesSchemaRefusesBadValues), which the manager would
// refuse only after the install, in a crash loop.
func TestChartMaxRebooting(t *testing.T) {
	for set, want := range map[string]string{"": "--max-rebooting=1", "manager.maxRebooting=4": "--max-rebooting=4"} {
		args := []string{"template", "rel", chartDir, "-n", "tier"}
		if set != "" {
			args = append(args, "--set", set)
		}
		dep := objects(t, "helm template", helm(t, args...))["Deployment/tier/latencytier-manager"]
		got := fmt.Sprint(dep["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"])
		if !strings.Contains(got, want) {
			t.Errorf("--set %q: manager args %s lack %s", set, got, want)
		}
	}
}

// TestChartRebootSlotsAndControlPlane: reboots.slots reaches ConfigMap
// latencytier-reboots (1 by default), and agent.controlPlaneNodes=Allow
// leaves out the binding of the policy that keeps the agent off
// control-plane nodes (rendered by default).
func TestChartRebootSlotsAndControlPlane(t *testing.T) {
	for _, c := range []struct {
		set, slots string
		binding    bool
	}{
		{"", "1", true},
		{"reboots.slots=4", "4", true},
		{"agent.controlPlaneNodes=Allow", "1", false},
		{"agent.controlPlaneNodes=Deny", "1", true},
	} {
		args := []string{"template", "rel", chartDir, "-n", "tier"}
		if c.set != "" {
			args = append(args, "--set", c.set)
		}
		objs := objects(t, "helm template", helm(t, args...))
		cm := objs["ConfigMap/tier/latencytier-reboots"]
		if got := fmt.Sprint(cm["data"]); got != "map[slots:"+c.slots+"]" {
			t.Errorf("--set %q: ConfigMap latencytier-reboots data %s, want slots %s", c.set, got, c.slots)
		}
		_, bound := objs["ValidatingAdmissionPolicyBinding/latencytier-agent-control-plane"]
		if _, policy := objs["ValidatingAdmissionPolicy/latencytier-agent-control-plane"]; bound != c.binding || !policy {
			t.Errorf("--set %q: control-plane binding rendered %v, want %v (policy rendered %v)", c.set, bound, c.binding, policy)
		}
	}
}

// TestChartTierSchedulerGate: featureGates.TierScheduler=true passes the
// gate to the manager and leaves out the binding of the policy that
// refuses scheduler.class Tier; by default the binding is there and the
// manager has no --feature-gates (config/default's layout).
func TestChartTierSchedulerGate(t *testing.T) {
	for _, c := range []struct {
		set     string
		on      bool
		binding bool
	}{
		{"", false, true},
		{"featureGates.TierScheduler=false", false, true},
		{"featureGates.TierScheduler=true", true, false},
	} {
		args := []string{"template", "rel", chartDir, "-n", "tier"}
		if c.set != "" {
			args = append(args, "--set", c.set)
		}
		objs := objects(t, "helm template", helm(t, args...))
		_, bound := objs["ValidatingAdmissionPolicyBinding/latencytier-tier-scheduler-gate"]
		if _, policy := objs["ValidatingAdmissionPolicy/latencytier-tier-scheduler-gate"]; bound != c.binding || !policy {
			t.Errorf("--set %q: gate binding rendered %v, want %v (policy rendered %v)", c.set, bound, c.binding, policy)
		}
		dep := objs["Deployment/tier/latencytier-manager"]
		argv := fmt.Sprint(dep["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"])
		if got := strings.Contains(argv, "--feature-gates=TierScheduler=true"); got != c.on {
			t.Errorf("--set %q: manager has --feature-gates=TierScheduler=true: %v, want %v", c.set, got, c.on)
		}
	}
	if out := helmFails(t, "template", "rel", chartDir, "--set", "featureGates.TierSchedular=true"); !strings.Contains(out, "TierSchedular") {
		t.Errorf("an unknown feature gate: want a schema refusal naming it, got:\n%s", out)
	}
}
