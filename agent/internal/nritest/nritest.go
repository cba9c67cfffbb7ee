// Package nritest runs containerd/nri's real runtime side (the adaptation
// containerd and CRI-O embed) in the test process, and fake plugins beside
// the agent's, for tests of who placed a container.
package nritest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	nriapi "github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// Runtime is the runtime side, listening on Socket.
type Runtime struct {
	R      *nriapi.Adaptation
	Socket string
}

// Start starts a runtime on a socket in a temp dir, stopped in t.Cleanup.
func Start(t testing.TB) *Runtime {
	t.Helper()
	return StartWith(t, nil, nil)
}

// StartWith is Start holding pods and ctrs, which it hands every plugin at
// registration (Synchronize).
func StartWith(t testing.TB, pods []*api.PodSandbox, ctrs []*api.Container) *Runtime {
	t.Helper()
	dir := t.TempDir()
	socket := filepath.Join(dir, "nri.sock")
	sync := func(ctx context.Context, cb nriapi.SyncCB) error {
		_, err := cb(ctx, pods, ctrs)
		return err
	}
	update := func(context.Context, []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) { return nil, nil }
	r, err := nriapi.New("containerd", "2.4.2", sync, update,
		nriapi.WithPluginPath(filepath.Join(dir, "plugins")), nriapi.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		nriapi.WithSocketPath(socket))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return &Runtime{R: r, Socket: socket}
}

// Create asks every registered plugin to adjust c of pod p, in index
// order, and returns the merged adjustment.
func (rt *Runtime) Create(t testing.TB, p *api.PodSandbox, c *api.Container) *api.ContainerAdjustment {
	t.Helper()
	c.PodSandboxId = p.Id
	b := rt.R.BlockPluginSync()
	defer b.Unblock()
	resp, err := rt.R.CreateContainer(context.Background(), &api.CreateContainerRequest{Pod: p, Container: c})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	return resp.GetAdjust()
}

// Start tells every plugin subscribed to StartContainer that c of pod p
// is about to start, as containerd does once the container's process
// exists (c.Pid) and before it runs.
func (rt *Runtime) Start(t testing.TB, p *api.PodSandbox, c *api.Container) {
	t.Helper()
	c.PodSandboxId = p.Id
	b := rt.R.BlockPluginSync()
	defer b.Unblock()
	if err := rt.R.StartContainer(context.Background(), &api.StartContainerRequest{Pod: p, Container: c}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
}

// Remove tells every plugin subscribed to RemoveContainer that c of pod p
// was removed.
func (rt *Runtime) Remove(t testing.TB, p *api.PodSandbox, c *api.Container) {
	t.Helper()
	c.PodSandboxId = p.Id
	b := rt.R.BlockPluginSync()
	defer b.Unblock()
	if err := rt.R.RemoveContainer(context.Background(), &api.RemoveContainerRequest{Pod: p, Container: c}); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
}

// placer is a plugin that puts every container of one pod on CPUs, as a
// DRA CPU driver or a resource policy does through NRI.
type placer struct {
	uid, cpus string
}

func (p placer) CreateContainer(_ context.Context, pod *api.PodSandbox, _ *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if pod.GetUid() != p.uid {
		return nil, nil, nil
	}
	a := &api.ContainerAdjustment{}
	a.SetLinuxCPUSetCPUs(p.cpus)
	return a, nil, nil
}

// Placer registers a plugin named name at index idx ("10": before the
// agent's 90) that places every container of pod uid on cpus, until the
// test ends; it returns once the runtime has it. Register it before the
// agent's plugin: its probe container is not one of the test's.
func Placer(t testing.TB, rt *Runtime, name, idx, uid, cpus string) {
	t.Helper()
	s, err := stub.New(placer{uid: uid, cpus: cpus}, stub.WithPluginName(name), stub.WithPluginIdx(idx),
		stub.WithSocketPath(rt.Socket))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); s.Stop(); s.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for !registered(t, rt, uid, cpus) {
		if time.Now().After(deadline) {
			t.Fatalf("plugin %s did not register", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// registered reports whether the runtime has plugin placer: it places a
// probe container of its pod (the adaptation lists its plugins only
// through requests).
func registered(t testing.TB, rt *Runtime, uid, cpus string) bool {
	a := rt.Create(t, &api.PodSandbox{Id: "probe", Uid: uid, Namespace: "probe", Name: "probe"}, &api.Container{Id: "probe", Name: "probe"})
	return a.GetLinux().GetResources().GetCpu().GetCpus() == cpus
}
