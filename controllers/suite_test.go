package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/featuregate"
)

// The suite runs one real kube-apiserver + etcd and one manager for every
// envtest test of the package; tests use their own node and profile names.
var (
	testEnv *envtest.Environment
	k8s     client.Client // direct client, as the user or an agent would be
	writes  atomic.Int64  // API writes made by the manager's client
	reads   atomic.Int64  // reads by the manager's client (proves it reconciled)
	// gets counts the manager's Gets of each Node and LatencyProfile by
	// name: the node and profile controllers get their object once per
	// reconcile (and the node controller a profile only when releasing).
	gets sync.Map // getKey → *atomic.Int64
	// kindWrites counts the manager's writes per Go type of the object
	// written (status writes included).
	kindWrites sync.Map // string → *atomic.Int64
	// kindConflicts counts the manager's patches, per Go type, that the
	// API server refused as written against an older resourceVersion:
	// nothing was stored.
	kindConflicts sync.Map // string → *atomic.Int64
	suiteReady    bool
)

const (
	testNamespace   = "latencytier-system"
	testSyncPeriod  = 2 * time.Second
	testUnreachable = 30 * time.Second
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if err := ensureAssets(); err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := testEnv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	defer func() { _ = testEnv.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := startSuite(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "starting suite:", err)
		return 1
	}
	suiteReady = true
	return m.Run()
}

// ensureAssets points envtest at the binaries built by hack/k8s-binaries.sh
// when KUBEBUILDER_ASSETS is not set (the Makefile sets it).
func ensureAssets() error {
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		return nil
	}
	out, err := exec.Command("../hack/k8s-binaries.sh", "--print-dir").Output()
	if err != nil {
		return fmt.Errorf("finding envtest binaries: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err != nil {
		return fmt.Errorf("no kube-apiserver in %s: run hack/k8s-binaries.sh", dir)
	}
	return os.Setenv("KUBEBUILDER_ASSETS", dir)
}

func startSuite(ctx context.Context, cfg *rest.Config) error {
	var err error
	k8s, err = client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		return err
	}
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}); err != nil {
		return err
	}
	for _, f := range []string{"../config/agent/service_account.yaml", "../config/agent/role.yaml", "../config/admission/policy.yaml",
		"../config/admission/allowed-sysctls.yaml", "../config/admission/reboot-slots.yaml",
		// The manager's generated RBAC, bound to its service account; the
		// suite's own manager runs as admin, tests impersonate the account.
		"../config/manager/service_account.yaml", "../config/rbac/role.yaml", "../config/rbac/role_binding.yaml"} {
		if err := applyFile(ctx, f); err != nil {
			return err
		}
	}
	ctrl.SetLogger(testLogger())
	sync := testSyncPeriod
	cacheOpts := cacheOptions(testNamespace)
	cacheOpts.SyncPeriod = &sync
	mgr, err := ctrl.NewManager(managerConfig(cfg), ctrl.Options{
		Scheme:  NewScheme(),
		Client:  clientOptions(),
		Cache:   cacheOpts,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Logger:  testLogger(),
		NewClient: func(c *rest.Config, o client.Options) (client.Client, error) {
			inner, err := client.New(c, o)
			return &countingClient{Client: inner}, err
		},
	})
	if err != nil {
		return err
	}
	// The suite's manager runs with the TierScheduler gate on (a profile
	// may ask for scheduler.class Tier); gate off is schedclass_gate_test.go's.
	opts := options{Namespace: testNamespace, UnreachableAfter: testUnreachable,
		Gates: featuregate.Gates{}.With(featuregate.TierScheduler, true)}
	if err := setup(mgr, opts); err != nil {
		return err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
		}
	}()
	return nil
}

// testLogger discards logs unless LATENCYTIER_TEST_LOG is set.
func testLogger() logr.Logger {
	if os.Getenv("LATENCYTIER_TEST_LOG") == "" {
		return logr.Discard()
	}
	return logr.FromSlogHandler(slogHandler(os.Stderr))
}

// applyFile creates every object of a multi-document YAML file.
func applyFile(ctx context.Context, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := k8s.Create(ctx, &u); err != nil {
			return fmt.Errorf("%s: creating %s %s: %w", path, u.GetKind(), u.GetName(), err)
		}
	}
}

// countingClient counts the manager's API writes and reads.
type countingClient struct {
	client.Client
}

func (c *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	reads.Add(1)
	switch obj.(type) {
	case *corev1.Node, *v1alpha1.LatencyProfile:
		n, _ := gets.LoadOrStore(getKey{fmt.Sprintf("%T", obj), key.Name}, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		if _, ok := obj.(*corev1.Node); ok && !uncopied(opts) {
			n, _ := gets.LoadOrStore(getKey{"decide", key.Name}, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *countingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	reads.Add(1)
	return c.Client.List(ctx, list, opts...)
}

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	countWrite(obj)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	countWrite(obj)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	countWrite(obj)
	err := c.Client.Patch(ctx, obj, patch, opts...)
	if apierrors.IsConflict(err) {
		n, _ := kindConflicts.LoadOrStore(fmt.Sprintf("%T", obj), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	return err
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	countWrite(obj)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *countingClient) Status() client.SubResourceWriter {
	return countingStatus{c.Client.Status()}
}

type countingStatus struct{ client.SubResourceWriter }

func (s countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	countWrite(obj)
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	countWrite(obj)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// countWrite counts one write of obj by the manager.
func countWrite(obj client.Object) {
	writes.Add(1)
	n, _ := kindWrites.LoadOrStore(fmt.Sprintf("%T", obj), new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

// writesOf is how many writes of objects of obj's type the manager made.
func writesOf(obj client.Object) int64 {
	n, ok := kindWrites.Load(fmt.Sprintf("%T", obj))
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// storedWritesOf is writesOf less the patches refused as conflicts.
func storedWritesOf(obj client.Object) int64 {
	n, ok := kindConflicts.Load(fmt.Sprintf("%T", obj))
	if !ok {
		return writesOf(obj)
	}
	return writesOf(obj) - n.(*atomic.Int64).Load()
}

// getKey names an object the manager gets: its Go type and name.
type getKey struct{ typ, name string }

func getsOf(obj client.Object, name string) int64 {
	n, ok := gets.Load(getKey{fmt.Sprintf("%T", obj), name})
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// nodeReconciles is how often the manager has looked at node: its
// profile's pass looks at each of its nodes (nodeSelection.decides).
func nodeReconciles(node string) int64 { return getsOf(&corev1.Node{}, node) }

// nodeDecisions is how often a profile's pass has decided node afresh
// (nodeSelection.decide reads it as a copy): a node already as its
// profile wants it is only looked at.
func nodeDecisions(node string) int64 {
	n, ok := gets.Load(getKey{"decide", node})
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// uncopied: opts read the cache's object without copying it.
func uncopied(opts []client.GetOption) bool {
	for _, o := range opts {
		if u, ok := o.(client.UnsafeDisableDeepCopyOption); ok && bool(u) {
			return true
		}
	}
	return false
}

// profileReconciles is how often the profile controller has reconciled profile.
func profileReconciles(profile string) int64 { return getsOf(&v1alpha1.LatencyProfile{}, profile) }

// waitForReconciles polls until the manager has reconciled every one of
// nodes and profiles n more times: after a test has made its last change,
// that is the window in which writes that must not come would have come
// (informer resyncs reconcile each of them every testSyncPeriod).
func waitForReconciles(t testing.TB, n int64, nodes, profiles []string) {
	t.Helper()
	type counter struct {
		what  string
		count func() int64
		from  int64
	}
	var cs []counter
	for _, name := range nodes {
		cs = append(cs, counter{"node " + name, func() int64 { return nodeReconciles(name) }, nodeReconciles(name)})
	}
	for _, name := range profiles {
		cs = append(cs, counter{"profile " + name, func() int64 { return profileReconciles(name) }, profileReconciles(name)})
	}
	eventually(t, fmt.Sprintf("%d more reconciles", n), func() error {
		for _, c := range cs {
			if got := c.count() - c.from; got < n {
				return fmt.Errorf("%s reconciled %d times", c.what, got)
			}
		}
		return nil
	})
}

// needSuite skips nothing: it fails a test that runs without the API server.
func needSuite(t testing.TB) {
	t.Helper()
	if !suiteReady {
		t.Fatal("envtest suite not started")
	}
}
