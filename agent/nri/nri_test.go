package nri_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	nriapi "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/go-logr/logr"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/internal/nritest"
	"latencytier.io/latencytier/agent/nri"
	"latencytier.io/latencytier/agent/owners"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// grants is a profile that grants quota removal and the isolated CPUs 2-3
// to namespaces labelled tier=latency, on a node with CPUs 0-3 online.
func grants() *nri.Grants {
	sel := &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{"tier": "latency"}}
	return &nri.Grants{
		Tuning: v1alpha1.TuningSpec{
			CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove, NamespaceSelector: sel},
			CPUs:     &v1alpha1.CPUSpec{Reserved: ptr.To("0-1"), Isolated: ptr.To("2-3"), NamespaceSelector: sel},
		},
		Namespaces: map[string]map[string]string{"trading": {"tier": "latency"}, "web": {"tier": "batch"}},
		Online:     "0-3",
	}
}

// runtime is containerd/nri's real runtime side (the adaptation containerd
// and CRI-O embed), listening on a socket in a temp dir.
type runtime struct {
	r      *nriapi.Adaptation
	socket string
}

func startRuntime(t testing.TB) *runtime {
	t.Helper()
	return startRuntimeWith(t, nil, nil)
}

// startRuntimeWith is startRuntime holding pods and ctrs, which it hands
// every plugin at registration (Synchronize).
func startRuntimeWith(t testing.TB, pods []*api.PodSandbox, ctrs []*api.Container) *runtime {
	t.Helper()
	rt := nritest.StartWith(t, pods, ctrs)
	return &runtime{r: rt.R, socket: rt.Socket}
}

// startPlugin runs p until the test ends and waits for it to register.
func startPlugin(t testing.TB, p *nri.Plugin) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	waitState(t, p, v1alpha1.ReasonHookConnected)
}

func waitState(t testing.TB, p *nri.Plugin, reason string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for p.State().Reason != reason {
		if time.Now().After(deadline) {
			t.Fatalf("plugin state %+v, want %s", p.State(), reason)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func pod(ns string, annotations map[string]string) *api.PodSandbox {
	return &api.PodSandbox{Id: "sandbox-" + ns, Name: "app", Uid: "uid-" + ns, Namespace: ns, Annotations: annotations}
}

var optIn = map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}

// ctr is a container with a 1-CPU limit (quota 100000 per 100000) on cpus.
func ctr(id, cpus string) *api.Container {
	return &api.Container{Id: id, PodSandboxId: "sandbox", Name: "app", Linux: &api.LinuxContainer{
		Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(100000), Period: api.UInt64(100000), Cpus: cpus}}}}
}

func create(t testing.TB, rt *runtime, p *api.PodSandbox, c *api.Container) *api.ContainerAdjustment {
	t.Helper()
	c.PodSandboxId = p.Id
	// As containerd does: no plugin is half-registered during a request.
	b := rt.r.BlockPluginSync()
	defer b.Unblock()
	resp, err := rt.r.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: p, Container: c})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	return resp.GetAdjust()
}

func quota(a *api.ContainerAdjustment) *int64 {
	if q := a.GetLinux().GetResources().GetCpu().GetQuota(); q != nil {
		return &q.Value
	}
	return nil
}

func cpus(a *api.ContainerAdjustment) string { return a.GetLinux().GetResources().GetCpu().GetCpus() }

func TestCreateContainer(t *testing.T) {
	rt := startRuntime(t)
	p := nri.New(rt.socket, logr.Discard())
	p.Publish(grants())
	startPlugin(t, p)
	if m := p.State().Message; !strings.Contains(m, "containerd 2.4.2 (NRI ") {
		t.Errorf("Connected message %q does not name the runtime and its NRI version", m)
	}

	for _, tc := range []struct {
		name      string
		pod       *api.PodSandbox
		cpus      string
		wantQuota bool
		wantCPUs  string
	}{
		{name: "granted, unplaced", pod: pod("trading", optIn), wantQuota: true, wantCPUs: "2-3"},
		{name: "granted, shared pool of every online CPU", pod: pod("trading", optIn), cpus: "0-3", wantQuota: true, wantCPUs: "2-3"},
		// kubelet's static CPU manager (or a DRA driver, another plugin)
		// placed it: its cpuset is left, the quota still goes.
		{name: "granted, placed by another owner", pod: pod("trading", optIn), cpus: "3", wantQuota: true},
		// The pod asks, its namespace is not granted: nothing.
		{name: "asks, namespace not granted", pod: pod("web", optIn)},
		// An unknown namespace is granted nothing.
		{name: "asks, namespace unknown", pod: pod("elsewhere", optIn)},
		// Granted namespace, the pod does not ask.
		{name: "granted namespace, no opt-in", pod: pod("trading", nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := create(t, rt, tc.pod, ctr("c-"+tc.pod.Namespace, tc.cpus))
			q := quota(a)
			switch {
			case tc.wantQuota && (q == nil || *q != -1):
				t.Errorf("quota adjustment %v, want -1", q)
			case !tc.wantQuota && q != nil:
				t.Errorf("quota adjusted to %d, want untouched", *q)
			}
			if got := cpus(a); got != tc.wantCPUs {
				t.Errorf("cpuset adjustment %q, want %q", got, tc.wantCPUs)
			}
		})
	}
}

// TestCreateContainerKeepsQuotaUnderBurst: policy Burst grants the same
// pods, but keeps their quota: the plugin must not remove it (NRI v0.12
// has no burst field, so the burst comes from the agent's next pass), and
// still places the container.
func TestCreateContainerKeepsQuotaUnderBurst(t *testing.T) {
	rt := startRuntime(t)
	p := nri.New(rt.socket, logr.Discard())
	g := grants()
	g.Tuning.CPUQuota.Policy = v1alpha1.CPUQuotaBurst
	p.Publish(g)
	startPlugin(t, p)
	a := create(t, rt, pod("trading", optIn), ctr("c-burst", ""))
	if q := quota(a); q != nil {
		t.Errorf("quota adjusted to %d under policy Burst, want kubelet's kept", *q)
	}
	if got := cpus(a); got != "2-3" {
		t.Errorf("cpuset adjustment %q, want 2-3", got)
	}
}

// TestCreateContainerFollowsGrants: the plugin decides from what the
// agent's last pass published; before any pass, and after a revert
// (nil), it adjusts nothing.
func TestCreateContainerFollowsGrants(t *testing.T) {
	rt := startRuntime(t)
	p := nri.New(rt.socket, logr.Discard())
	startPlugin(t, p)
	if a := create(t, rt, pod("trading", optIn), ctr("c1", "")); quota(a) != nil || cpus(a) != "" {
		t.Fatalf("adjusted %v before any grant was published", a)
	}
	p.Publish(grants())
	if a := create(t, rt, pod("trading", optIn), ctr("c2", "")); quota(a) == nil {
		t.Fatal("no quota removal once granted")
	}
	p.Publish(nil)
	if a := create(t, rt, pod("trading", optIn), ctr("c3", "")); quota(a) != nil || cpus(a) != "" {
		t.Fatalf("adjusted %v after the grants were withdrawn", a)
	}
}

// TestUpdateContainerReasserts: kubelet's resize puts a quota back in the
// request; the plugin leaves kubelet's quota (kubelet waits for the runtime
// to report what it asked before it calls a resize done) and re-asserts a
// granted container's cpuset only; a non-granted one's resize is left alone.
func TestUpdateContainerReasserts(t *testing.T) {
	rt := startRuntime(t)
	p := nri.New(rt.socket, logr.Discard())
	p.Publish(grants())
	startPlugin(t, p)

	resize := func(pd *api.PodSandbox, id string) *api.ContainerUpdate {
		t.Helper()
		c := ctr(id, "")
		c.PodSandboxId = pd.Id
		res := &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(200000), Period: api.UInt64(100000)}}
		b := rt.r.BlockPluginSync()
		defer b.Unblock()
		resp, err := rt.r.UpdateContainer(context.Background(), &api.UpdateContainerRequest{Pod: pd, Container: c, LinuxResources: res})
		if err != nil {
			t.Fatalf("UpdateContainer: %v", err)
		}
		for _, u := range resp.GetUpdate() {
			if u.GetContainerId() == id {
				return u
			}
		}
		return nil
	}
	u := resize(pod("trading", optIn), "granted")
	if q := u.GetLinux().GetResources().GetCpu().GetQuota(); q != nil && q.Value != 200000 {
		t.Errorf("granted container's resize quota changed to %v, want kubelet's 200000 left as asked", q)
	}
	if c := u.GetLinux().GetResources().GetCpu().GetCpus(); c != "2-3" {
		t.Errorf("granted container's resize cpuset %q, want 2-3", c)
	}
	// No update for it: the runtime applies kubelet's resources as asked.
	if u := resize(pod("web", optIn), "refused"); u != nil {
		t.Errorf("non-granted container's resize was changed: %v", u)
	}
}

// TestFailOpen: a decision that never comes is no adjustment, answered
// before the runtime's request timeout (set to 1 s here, half the default,
// so an answer at or past it fails the request); the plugin stays
// registered and the next decision is served.
func TestFailOpen(t *testing.T) {
	nriapi.SetPluginRequestTimeout(time.Second)
	t.Cleanup(func() { nriapi.SetPluginRequestTimeout(nriapi.DefaultPluginRequestTimeout) })
	rt := startRuntime(t)
	release := make(chan struct{})
	var stalls atomic.Bool
	stalls.Store(true)
	p := nri.New(rt.socket, logr.Discard(), nri.WithDecide(func(ctx context.Context, _ *api.PodSandbox, _ *api.Container) (nri.Decision, error) {
		if stalls.Load() {
			<-release
			return nri.Decision{RemoveQuota: true}, nil
		}
		return nri.Decision{RemoveQuota: true}, nil
	}))
	startPlugin(t, p)
	defer close(release)

	a := create(t, rt, pod("trading", optIn), ctr("stalled", ""))
	if quota(a) != nil || cpus(a) != "" {
		t.Fatalf("stalled decision adjusted %v, want nothing", a)
	}
	if s := p.State(); s.Reason != v1alpha1.ReasonHookConnected {
		t.Fatalf("plugin state %+v after a stalled decision, want Connected", s)
	}
	stalls.Store(false)
	if a := create(t, rt, pod("trading", optIn), ctr("next", "")); quota(a) == nil {
		t.Fatal("the decision after a stall was not served")
	}
}

// runtimeEnv names the socket a child test process serves as the runtime
// (TestReconnects kills it, as a runtime restart does).
const runtimeEnv = "LATENCYTIER_TEST_NRI_RUNTIME"

func TestMain(m *testing.M) {
	nri.SetLog(logr.Discard())
	if socket := os.Getenv(runtimeEnv); socket != "" {
		dir := filepath.Dir(socket)
		sync := func(ctx context.Context, cb nriapi.SyncCB) error { _, err := cb(ctx, nil, nil); return err }
		r, err := nriapi.New("containerd", "2.4.2", sync, func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil },
			nriapi.WithPluginPath(filepath.Join(dir, "plugins")), nriapi.WithPluginConfigPath(filepath.Join(dir, "conf.d")), nriapi.WithSocketPath(socket))
		if err == nil {
			err = r.Start()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		select {} // until killed
	}
	os.Exit(m.Run())
}

// TestReconnects: the plugin reports NoSocket while there is no runtime,
// Disconnected when the runtime process dies, and registers again when a
// new runtime process listens on the socket.
func TestReconnects(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "nri.sock")
	p := nri.New(socket, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitState(t, p, v1alpha1.ReasonHookNoSocket)

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), runtimeEnv+"="+socket)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	rt := start()
	waitState(t, p, v1alpha1.ReasonHookConnected)
	if err := rt.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, v1alpha1.ReasonHookDisconnected)
	start()
	waitState(t, p, v1alpha1.ReasonHookConnected)
}

// BenchmarkCreateContainer is the time the runtime spends on one
// CreateContainer request through the plugin (ttrpc round trip and the
// grant decision) for a granted container.
func BenchmarkCreateContainer(b *testing.B) {
	rt := startRuntime(b)
	p := nri.New(rt.socket, logr.Discard())
	p.Publish(grants())
	startPlugin(b, p)
	pd := pod("trading", optIn)
	c := ctr("bench", "")
	b.ResetTimer()
	for b.Loop() {
		if a := create(b, rt, pd, c); quota(a) == nil {
			b.Fatal("no adjustment")
		}
	}
}

// A plugin registered before the agent's (a DRA CPU driver's, index 10)
// places a granted container on CPU 1: the agent's plugin leaves the
// cpuset, removes the quota, and remembers the placement for the pass's
// owner check until the container is removed.
func TestRemembersOtherPlacers(t *testing.T) {
	rt := nritest.Start(t)
	nritest.Placer(t, rt, "fakedra", "10", "uid-trading", "1")
	p := nri.New(rt.Socket, logr.Discard())
	p.Publish(grants())
	startPlugin(t, p)
	c := ctr("c-placed", "")
	a := rt.Create(t, pod("trading", optIn), c)
	if got := cpus(a); got != "1" {
		t.Fatalf("cpuset adjustment %q; want the other plugin's 1, left by ours", got)
	}
	if q := quota(a); q == nil || *q != -1 {
		t.Fatalf("quota %v; want removed", q)
	}
	rt.Create(t, pod("web", nil), ctr("c-unplaced", ""))
	// A granted container nobody placed: the plugin places it, and
	// remembers it as its own.
	mine := pod("trading", optIn)
	mine.Namespace, mine.Uid = "trading", "uid-mine"
	rt.Create(t, mine, ctr("c-mine", ""))
	want := []owners.Placement{
		{PodUID: "uid-mine", Namespace: "trading", Pod: "app", ContainerID: "c-mine", Container: "app", CPUs: "2-3", ByAgent: true},
		{PodUID: "uid-trading", Namespace: "trading", Pod: "app", ContainerID: "c-placed", Container: "app", CPUs: "1"},
	}
	if got := p.Placements(); !reflect.DeepEqual(got, want) {
		t.Fatalf("placements %+v; want %+v", got, want)
	}
	if err := rt.R.RemoveContainer(context.Background(), &api.RemoveContainerRequest{Pod: pod("trading", optIn), Container: c}); err != nil {
		t.Fatal(err)
	}
	if got := p.Placements(); len(got) != 1 || got[0].ContainerID != "c-mine" {
		t.Fatalf("placements %+v after the container was removed; want only c-mine", got)
	}
}
