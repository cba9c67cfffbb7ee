package loop

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/agent/bootargs/bootargstest"
	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// TestAgentRebootsWithItsRole runs the agent loop as its service account
// (exactly config/agent/role.yaml, confined by config/admission, the
// admin's one reboot slot from config/admission/reboot-slots.yaml) on a
// temp-dir Debian host staged for a reboot. A forged Rebooting on its
// uncordoned node is refused with a Warning RebootRefused event and no
// reboot; once the node is cordoned with the manager's marker the agent
// takes the slot through the admission policy and reboots once, and after
// the boot id changed it gives the slot back. It reads only its own Node,
// writes only the slot, is refused nothing, and uses every verb its role
// grants on nodes and leases.
func TestAgentRebootsWithItsRole(t *testing.T) {
	c, env := startAPI(t)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: slotsNamespace}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"../../config/agent/service_account.yaml", "../../config/agent/role.yaml",
		"../../config/admission/policy.yaml", "../../config/admission/reboot-slots.yaml"} {
		applyManifest(t, c, f)
	}
	files := bootargstest.Files("quiet")
	files["proc/stat"] = "cpu 1 2 3\nbtime 1700000000\n"
	files["sys/devices/system/cpu/online"] = "0-3"
	root := fakeHostWith(t, files)
	if err := bootargstest.MakeExecutable(root); err != nil {
		t.Fatal(err)
	}
	u := &bootargstest.UpdateGRUB{Root: root}
	if err := u.Run(ctx, "baseline", nil); err != nil {
		t.Fatal(err)
	}
	const name = "node-a"
	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	sp := spec()
	sp.Tuning.CPUs = &v1alpha1.CPUSpec{Reserved: ptr.To("0-1"), Isolated: ptr.To("2-3"), NamespaceSelector: &v1alpha1.NamespaceSelector{}}
	sp.Tuning.BootParameters = &v1alpha1.BootParametersSpec{Policy: v1alpha1.BootReboot}
	if err := c.Create(ctx, &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sp}); err != nil {
		t.Fatal(err)
	}
	slots := filepath.Join(t.TempDir(), "slots")
	testroot.Write(t, slots, "1")

	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:latencytier-system:latencytier-agent",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:latencytier-system", "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {name}},
	}
	rec := &callLog{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &recorder{log: rec, next: rt} })
	var reboots atomic.Int32
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	// Runtime mode, as config/agent runs it: the role grants nothing on
	// pods, and the node's pods (none) come from the runtime.
	hook, pods := startRuntimePods(t, runCtx, nil, nil)
	go func() {
		done <- Run(runCtx, Options{NodeName: name, Root: root, Resync: 300 * time.Millisecond,
			Log: testr.NewWithOptions(t, testr.Options{Verbosity: 1}), Config: cfg, HostTool: u.Run,
			Boot: BootOptions{Reboot: func(context.Context) error { reboots.Add(1); return nil },
				SlotsFile: slots, SlotsNamespace: slotsNamespace}, Hook: hook, RuntimePods: pods})
	}()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	defer func() { _ = stop() }()
	get := func() *v1alpha1.LatencyNode {
		t.Helper()
		ln := &v1alpha1.LatencyNode{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, ln); err != nil {
			t.Fatal(err)
		}
		return ln
	}
	eventually(t, "Staged reported as the agent's service account", func() bool {
		b := get().Status.Boot
		return b != nil && b.State == v1alpha1.BootStaged
	})

	// Forged: Rebooting on the uncordoned node.
	ln := get()
	ln.Spec.Reboot = &v1alpha1.NodeRebootSpec{Revision: "forged-1", Phase: v1alpha1.RebootRequested, Since: metav1.Now(), BootID: ln.Status.Boot.BootID}
	if err := c.Update(ctx, ln); err != nil {
		t.Fatal(err)
	}
	const why = "reboot for forged-1 refused: node not cordoned by the manager for revision forged-1: the node is schedulable"
	eventually(t, "a Warning RebootRefused event on the LatencyNode", func() bool {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(evs.Items, func(e eventsv1.Event) bool {
			return e.Reason == eventRebootRefused && e.Type == corev1.EventTypeWarning && e.Regarding.Name == name && e.Note == why
		})
	})
	eventually(t, "status.boot saying why", func() bool {
		b := get().Status.Boot
		return b != nil && b.State == v1alpha1.BootStaged && b.Message == why
	})
	time.Sleep(time.Second) // more passes
	if n := reboots.Load(); n != 0 || root.Exists(root.Path("var/lib/latencytier/"+rebootFile)) {
		t.Fatalf("the forged request rebooted the node %d times (or wrote the record)", n)
	}

	// The manager's cordon for the revision: the agent takes the slot and reboots once.
	node := &corev1.Node{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	node.Spec.Unschedulable = true
	node.Annotations = map[string]string{v1alpha1.RebootCordonAnnotation: "forged-1"}
	if err := c.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	holder := func() string {
		l := &coordinationv1.Lease{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: slotsNamespace, Name: SlotName(0)}, l); err != nil {
			return "<" + err.Error() + ">"
		}
		return ptr.Deref(l.Spec.HolderIdentity, "")
	}
	eventually(t, "the reboot, slot 0 held", func() bool { return reboots.Load() == 1 && holder() == name })
	time.Sleep(time.Second)
	if n := reboots.Load(); n != 1 {
		t.Fatalf("rebooted %d times for one request", n)
	}
	// The node comes back: the slot goes back.
	testroot.Write(t, root.Proc("sys", "kernel", "random", "boot_id"), "55555555-0000-0000-0000-000000000000\n")
	eventually(t, "slot 0 given back after the boot", func() bool { return holder() == "" })
	if err := stop(); err != nil {
		t.Fatalf("agent: %v", err)
	}

	used := map[string]bool{}
	for _, call := range rec.snapshot() {
		if call.code == http.StatusForbidden || call.code == http.StatusUnauthorized || call.code == http.StatusUnprocessableEntity {
			t.Errorf("%s %s %s refused (%d)", call.verb, call.resource, call.path, call.code)
		}
		switch call.resource {
		case "nodes":
			if call.verb != "get" || !strings.HasSuffix(call.path, "/nodes/"+name) {
				t.Errorf("%s %s: the agent reads only its own Node", call.verb, call.path)
			}
		case "leases":
			if !strings.Contains(call.path, "/namespaces/"+slotsNamespace+"/leases") ||
				(call.verb != "create" && !strings.HasSuffix(call.path, "/"+SlotName(0))) {
				t.Errorf("%s %s: the agent writes only its reboot slots", call.verb, call.path)
			}
		}
		used[call.resource+" "+call.verb] = true
	}
	checkNoUnusedGrants(t, agentRules(t), used, "nodes", "leases")
}

// agentRules are the rules of every role in config/agent/role.yaml (the
// ClusterRole and the namespaced Role of the reboot slots).
func agentRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	rules := agentRole(t).Rules
	data, err := os.ReadFile("../../config/agent/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		var role rbacv1.Role
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind == "Role" {
			rules = append(rules, role.Rules...)
		}
	}
	return rules
}
