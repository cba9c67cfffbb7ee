package desired_test

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cpuquota"
	"latencytier.io/latencytier/agent/cpuset"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

const (
	grantedUID = "2c5a1d6f-0e8b-4c2f-9a11-123456789abc"
	refusedUID = "3d6b2e70-1f9c-4d30-8b22-23456789abcd"
	tenantKey  = "latencytier.io/latency-tenant"
)

func grantPodRel(uid string) string { return "sys/fs/cgroup/kubepods/burstable/pod" + uid }

// grantRoot is a cgroup v2 node (a kubelet pod tree: this machine has none)
// with two burstable pods, each limited to 1.5 CPUs and on every CPU.
func grantRoot(t *testing.T) *host.Root {
	files := map[string]string{
		"sys/fs/cgroup/cgroup.controllers":     "cpuset cpu\n",
		"sys/fs/cgroup/cgroup.subtree_control": "cpuset cpu\n",
	}
	for _, uid := range []string{grantedUID, refusedUID} {
		files[grantPodRel(uid)+"/cpu.max"] = "150000 100000\n"
		files[grantPodRel(uid)+"/cpuset.cpus"] = "\n"
	}
	return testroot.New(t, files)
}

func grantSpec() v1alpha1.TuningSpec {
	res, iso := "0", "1"
	granted := &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{tenantKey: "true"}}
	return v1alpha1.TuningSpec{
		CPUs:     &v1alpha1.CPUSpec{Reserved: &res, Isolated: &iso, NamespaceSelector: granted},
		CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove, NamespaceSelector: granted},
	}
}

// Both pods carry the opt-in annotation; only "gateway" is a namespace the
// cluster admin labelled.
func grantPods(gatewayGranted bool) []podcgroup.Pod {
	ann := map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}
	gw := map[string]string{"kubernetes.io/metadata.name": "gateway"}
	if gatewayGranted {
		gw[tenantKey] = "true"
	}
	return []podcgroup.Pod{
		{UID: grantedUID, Namespace: "gateway", Name: "gw", Annotations: ann, NamespaceLabels: gw},
		{UID: refusedUID, Namespace: "tenant", Name: "sneaky", Annotations: ann,
			NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "tenant"}},
	}
}

// A pod owner cannot opt out of its CPU limit, or onto the isolated CPUs,
// by annotation alone: the pod in a namespace the profile's selectors do not
// grant keeps its quota and its CPUs and is reported Refused, naming the pod,
// its namespace and the profile field; the pod in a granted namespace is
// tuned. Revoking the grant (relabelling the namespace) restores the
// originals.
func TestOptInNeedsTheNamespaceGrant(t *testing.T) {
	root := grantRoot(t)
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	pass := func(pods []podcgroup.Pod) (desired.State, apply.Report) {
		t.Helper()
		ds := desired.Render(root, sysctl.Layout{}, grantSpec(), pods, nil)
		rep, err := e.Apply(apply.Meta{Profile: "p", Undetermined: ds.Undetermined}, ds.Knobs)
		if err != nil {
			t.Fatal(err)
		}
		return ds, rep
	}
	read := func(uid, file string) string { return testroot.Read(t, root.Path(grantPodRel(uid)+"/"+file)) }

	ds, rep := pass(grantPods(true))
	if got := read(grantedUID, "cpu.max"); got != "max 100000" {
		t.Errorf("granted pod: cpu.max = %q, want the limit removed (max 100000)", got)
	}
	if got := read(grantedUID, "cpuset.cpus"); got != "1" {
		t.Errorf("granted pod: cpuset.cpus = %q, want the isolated CPU 1", got)
	}
	if got := read(refusedUID, "cpu.max"); got != "150000 100000" {
		t.Errorf("pod outside the grant: cpu.max = %q, want its limit kept (150000 100000)", got)
	}
	if got := read(refusedUID, "cpuset.cpus"); got != "" {
		t.Errorf("pod outside the grant: cpuset.cpus = %q, want it left where it was", got)
	}
	sneaky := grantPods(true)[1]
	for _, w := range []struct{ id, field, reason string }{
		{cpuquota.PodID(sneaky), "cpuQuota.namespaceSelector", desired.ReasonQuotaOptInRefused},
		{cpuset.PodID(sneaky), "cpus.namespaceSelector", desired.ReasonIsolatedOptInRefused},
	} {
		r := find(ds.Results, w.id)
		if r == nil || r.State != v1alpha1.SettingRefused {
			t.Errorf("%s: result %+v, want Refused", w.id, r)
			continue
		}
		for _, s := range []string{"tenant/sneaky", "namespace tenant", w.field} {
			if !strings.Contains(r.Message, s) {
				t.Errorf("%s: message %q does not name %q", w.id, r.Message, s)
			}
		}
		if !hasRefusal(ds.Refusals, refusedUID, w.field, w.reason) {
			t.Errorf("no %s refusal for the tenant pod: %+v", w.reason, ds.Refusals)
		}
	}
	gw := grantPods(true)[0]
	for _, r := range append(ds.Results, rep.Results...) {
		if (strings.HasPrefix(r.Setting, cpuquota.PodID(gw)) || strings.HasPrefix(r.Setting, cpuset.PodID(gw))) && r.State != v1alpha1.SettingApplied {
			t.Errorf("granted pod: %s is %s (%s)", r.Setting, r.State, r.Message)
		}
	}
	if len(ds.Refusals) != 2 {
		t.Errorf("refusals = %+v, want the tenant pod's two", ds.Refusals)
	}

	// The admin takes the label off the gateway namespace: its pod gets its
	// limit and its CPUs back, and is now refused too.
	ds, _ = pass(grantPods(false))
	if got := read(grantedUID, "cpu.max"); got != "150000 100000" {
		t.Errorf("after the grant is revoked: cpu.max = %q, want the original 150000 100000", got)
	}
	if got := read(grantedUID, "cpuset.cpus"); got != "" {
		t.Errorf("after the grant is revoked: cpuset.cpus = %q, want the original (empty)", got)
	}
	if !hasRefusal(ds.Refusals, grantedUID, "cpuQuota.namespaceSelector", desired.ReasonQuotaOptInRefused) {
		t.Errorf("revoked pod not reported: %+v", ds.Refusals)
	}
}

func hasRefusal(rs []desired.Refusal, uid, field, reason string) bool {
	for _, r := range rs {
		if r.Pod.UID == uid && r.Field == field && r.Reason == reason {
			return true
		}
	}
	return false
}
