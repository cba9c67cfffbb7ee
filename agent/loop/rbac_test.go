package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	nriadapt "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/nri"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// apiCall is one request the agent made and the API server's answer.
type apiCall struct {
	verb, resource, fieldSelector, path string
	code                                int
}

// callLog collects the requests of every client built from one rest.Config.
type callLog struct {
	mu    sync.Mutex
	calls []apiCall
}

func (l *callLog) snapshot() []apiCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// recorder is the transport wrapper (rest.Config.Wrap) that records into log.
type recorder struct {
	log  *callLog
	next http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	verb, resource := requestVerb(req)
	q := req.URL.Query()
	call := apiCall{verb: verb, resource: resource, fieldSelector: q.Get("fieldSelector"), path: req.URL.Path, code: code}
	r.log.mu.Lock()
	r.log.calls = append(r.log.calls, call)
	// A watch that starts with the current objects (client-go's watch-list
	// in place of the informer's initial list) is that list too.
	if verb == "watch" && q.Get("sendInitialEvents") == "true" {
		call.verb = "list"
		r.log.calls = append(r.log.calls, call)
	}
	r.log.mu.Unlock()
	return resp, err
}

// requestVerb maps a request to its RBAC verb and resource
// ("latencynodes/status"), the way the API server's request info does for
// the paths the agent uses: /api/v1/[namespaces/NS/]RES[/NAME[/SUB]] and
// /apis/GROUP/VERSION/[namespaces/NS/]RES[/NAME[/SUB]].
func requestVerb(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(req.Method), req.URL.Path
	}
	if len(parts) > 2 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return strings.ToLower(req.Method), req.URL.Path
	}
	resource = parts[0]
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	named := len(parts) >= 2
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			return "watch", resource
		case named:
			return "get", resource
		}
		return "list", resource
	case http.MethodPost:
		return "create", resource
	case http.MethodPut:
		return "update", resource
	case http.MethodPatch:
		return "patch", resource
	case http.MethodDelete:
		if named {
			return "delete", resource
		}
		return "deletecollection", resource
	}
	return strings.ToLower(req.Method), resource
}

// applyManifest creates every object of a multi-document YAML file.
func applyManifest(t *testing.T, c client.Client, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(context.Background(), &u); err != nil {
			t.Fatalf("%s: creating %s %s: %v", path, u.GetKind(), u.GetName(), err)
		}
	}
}

// agentRole is the ClusterRole in config/agent/role.yaml.
func agentRole(t *testing.T) rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile("../../config/agent/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			t.Fatal(err)
		}
		if role.Kind == "ClusterRole" {
			return role
		}
	}
	t.Fatal("no ClusterRole in config/agent/role.yaml")
	return rbacv1.ClusterRole{}
}

// podsRule is what the chart's agent.podSource: APIServer adds to the
// agent's ClusterRole (charts/podsource_test.go checks the chart renders
// exactly it).
var podsRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}}

// TestAgentRunsWithItsRole runs the agent as its service account, bound to
// exactly config/agent/role.yaml (Runtime mode, the default: nothing on
// pods) or that role with podsRule (APIServer mode), confined by
// config/admission, with a token bound to its node: it applies and
// reports, is refused nothing, and every verb the role grants on what the
// agent reads and writes is one it used. In Runtime mode it learns its
// pod from a real NRI runtime (containerd/nri's adaptation) and removes
// its quota without one request for pods; in APIServer mode it asks only
// for its own node's pods.
func TestAgentRunsWithItsRole(t *testing.T) {
	for _, mode := range []string{PodSourceRuntime, PodSourceAPIServer} {
		t.Run(mode, func(t *testing.T) { runWithRole(t, mode) })
	}
}

func runWithRole(t *testing.T, mode string) {
	c, env := startAPI(t)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "latencytier-system"}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"../../config/agent/service_account.yaml", "../../config/agent/role.yaml", "../../config/admission/policy.yaml"} {
		applyManifest(t, c, f)
	}
	rules := agentRole(t).Rules
	if mode == PodSourceAPIServer {
		role := &rbacv1.ClusterRole{}
		if err := c.Get(ctx, types.NamespacedName{Name: "latencytier-agent"}, role); err != nil {
			t.Fatal(err)
		}
		role.Rules = append(role.Rules, podsRule)
		rules = role.Rules
		if err := c.Update(ctx, role); err != nil {
			t.Fatal(err)
		}
	}
	root := fakeHost(t)
	// Quota removal for every namespace: the pod on node-a opts in.
	tuned := spec()
	tuned.Tuning.CPUQuota = &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove, NamespaceSelector: &v1alpha1.NamespaceSelector{}}
	var mine *corev1.Pod
	for _, name := range []string{"node-a", "node-b"} {
		if err := c.Create(ctx, &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: tuned}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gw-" + name, Namespace: "default",
			Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}},
			Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if name == "node-a" {
			mine = pod
		}
	}
	cpuMax := root.Cgroup("kubepods", "burstable", "pod"+string(mine.UID), "cpu.max")
	testroot.Write(t, cpuMax, "150000 100000\n")

	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:latencytier-system:latencytier-agent",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:latencytier-system", "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {"node-a"}},
	}
	rec := &callLog{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &recorder{log: rec, next: rt} })

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	o := Options{NodeName: "node-a", Root: root, Resync: 300 * time.Millisecond,
		Log: testr.NewWithOptions(t, testr.Options{Verbosity: 1}), Config: cfg}
	if mode == PodSourceRuntime {
		// The runtime knows the pod as kubelet made it: its sandbox
		// (labels, annotations, cgroup parent) and one container.
		sb := &api.PodSandbox{Id: "sb-gw", Name: mine.Name, Namespace: mine.Namespace, Uid: string(mine.UID),
			Annotations: mine.Annotations, Labels: map[string]string{"io.kubernetes.pod.name": mine.Name},
			Linux: &api.LinuxPodSandbox{CgroupParent: "/kubepods/burstable/pod" + string(mine.UID)}}
		ctr := &api.Container{Id: strings.Repeat("c0", 32), PodSandboxId: "sb-gw", Name: "c", State: api.ContainerState_CONTAINER_RUNNING}
		o.Hook, o.RuntimePods = startRuntimePods(t, runCtx, []*api.PodSandbox{sb}, []*api.Container{ctr})
	}
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, o) }()
	ln := &v1alpha1.LatencyNode{}
	eventually(t, "Applied=True reported as the agent's service account", func() bool {
		return c.Get(ctx, types.NamespacedName{Name: "node-a"}, ln) == nil &&
			conditionIs(ln, v1alpha1.NodeApplied, metav1.ConditionTrue) && ln.Status.ObservedGeneration == ln.Generation
	})
	eventually(t, "the opted-in pod's quota removed", func() bool { return testroot.Read(t, cpuMax) == "max 100000" })
	// A few more passes (resync, pod events), then the shutdown check.
	time.Sleep(time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("agent: %v", err)
	}

	used := map[string]bool{}
	for _, call := range rec.snapshot() {
		if call.code == http.StatusForbidden || call.code == http.StatusUnauthorized {
			t.Errorf("%s %s refused (%d): the role lacks what the agent calls", call.verb, call.resource, call.code)
		}
		switch call.resource {
		case "pods":
			if mode == PodSourceRuntime {
				t.Errorf("%s pods (field selector %q) in Runtime mode: the agent must not read pods from the API server", call.verb, call.fieldSelector)
			} else if call.fieldSelector != "spec.nodeName=node-a" {
				t.Errorf("%s pods with field selector %q: the agent must ask only for its own node's pods", call.verb, call.fieldSelector)
			}
		case "latencynodes":
			if (call.verb == "list" || call.verb == "watch") && call.fieldSelector != "metadata.name=node-a" {
				t.Errorf("%s latencynodes with field selector %q: the agent must ask only for its own", call.verb, call.fieldSelector)
			}
		}
		used[call.resource+" "+call.verb] = true
	}
	// Every verb granted on what this run exercises must have been used
	// (nodes and leases: TestAgentRebootsWithItsRole, which reboots).
	checkNoUnusedGrants(t, rules, used, "latencynodes", "latencynodes/status", "pods")
	var calls []string
	for k := range used {
		calls = append(calls, k)
	}
	sort.Strings(calls)
	t.Logf("agent calls: %s", strings.Join(calls, ", "))
}

// startRuntimePods starts containerd/nri's runtime side (the adaptation
// containerd embeds) holding pods and ctrs, and the agent's NRI plugin
// with a pod source, registered with it until ctx ends.
func startRuntimePods(t *testing.T, ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) (RuntimeHook, RuntimePods) {
	t.Helper()
	dir := t.TempDir()
	socket := filepath.Join(dir, "nri.sock")
	syncFn := func(ctx context.Context, cb nriadapt.SyncCB) error {
		_, err := cb(ctx, pods, ctrs)
		return err
	}
	update := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	rt, err := nriadapt.New("containerd", "2.4.2", syncFn, update, nriadapt.WithPluginPath(filepath.Join(dir, "plugins")),
		nriadapt.WithPluginConfigPath(filepath.Join(dir, "conf.d")), nriadapt.WithSocketPath(socket))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)
	src := nri.NewPods(func(err error) { t.Errorf("runtime pod refused: %v", err) })
	p := nri.New(socket, testr.New(t).WithName("nri"), nri.WithPods(src))
	go func() { _ = p.Run(ctx) }()
	return p, src
}

// checkNoUnusedGrants fails when rules grant a verb on one of resources
// that the run never used (used holds "resource verb").
func checkNoUnusedGrants(t *testing.T, rules []rbacv1.PolicyRule, used map[string]bool, resources ...string) {
	t.Helper()
	var unused []string
	for _, rule := range rules {
		for _, res := range rule.Resources {
			if !slices.Contains(resources, res) {
				continue
			}
			for _, verb := range rule.Verbs {
				if !used[res+" "+verb] {
					unused = append(unused, fmt.Sprintf("%s %s", verb, res))
				}
			}
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("config/agent/role.yaml grants what the agent never calls: %s", strings.Join(unused, ", "))
	}
}
