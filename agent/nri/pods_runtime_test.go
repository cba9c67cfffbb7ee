package nri_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/nri"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func podsNow(t *testing.T, c *nri.Pods) []podcgroup.Pod {
	t.Helper()
	pods, err := c.Pods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// waitChanged waits for the cache's change signal, which enqueues a pass.
func waitChanged(t *testing.T, c *nri.Pods, what string) {
	t.Helper()
	select {
	case <-c.Changed():
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no change signalled", what)
	}
}

// The pod source fed by the real runtime side: what it holds at
// registration, then a pod's life as containerd relays kubelet's CRI calls,
// each signalled; the plugin's grants at CreateContainer are unchanged.
func TestPodsThroughTheRuntime(t *testing.T) {
	running := &api.PodSandbox{Id: "sb-running", Name: "db", Uid: "uid-db", Namespace: "trading",
		Labels: map[string]string{"app": "db", "io.kubernetes.pod.uid": "uid-db"},
		Linux:  &api.LinuxPodSandbox{CgroupParent: "kubepods-besteffort-poduid_db.slice"}}
	rt := startRuntimeWith(t, []*api.PodSandbox{running}, []*api.Container{{Id: "ctr-db", PodSandboxId: "sb-running", Name: "db", State: api.ContainerState_CONTAINER_RUNNING}})
	pods := nri.NewPods(func(err error) { t.Errorf("refused: %v", err) })
	p := nri.New(rt.socket, logr.Discard(), nri.WithPods(pods))
	p.Publish(grants())
	startPlugin(t, p)

	got := podsNow(t, pods)
	if len(got) != 1 || got[0].UID != "uid-db" || got[0].QOSClass != nri.QOSBestEffort || len(got[0].ContainerIDs) != 1 || got[0].Labels["io.kubernetes.pod.uid"] != "" {
		t.Fatalf("after Synchronize: %+v", got)
	}
	ctx := context.Background()
	gw := pod("trading", optIn)
	gw.Linux = &api.LinuxPodSandbox{CgroupParent: "/kubepods/pod" + gw.Uid}
	if err := rt.r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: gw}); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, pods, "RunPodSandbox")
	c := ctr("ctr-gw", "")
	if adj := create(t, rt, gw, c); quota(adj) == nil || *quota(adj) != -1 {
		t.Errorf("CreateContainer with a pod source: adjustment %+v; want the quota removed as without one", adj)
	}
	if err := rt.r.StartContainer(ctx, &api.StartContainerRequest{Pod: gw, Container: c}); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, pods, "CreateContainer/StartContainer")
	if g := find(podsNow(t, pods), gw.Uid); g == nil || g.QOSClass != nri.QOSGuaranteed || strings.Join(g.ContainerIDs, ",") != "ctr-gw" ||
		g.Annotations[v1alpha1.CPUQuotaAnnotation] != v1alpha1.CPUQuotaDisable {
		t.Fatalf("after RunPodSandbox, CreateContainer, StartContainer: %+v", g)
	}

	// An in-place resize: UpdateContainer opens it, PostUpdateContainer ends it.
	if _, err := rt.r.UpdateContainer(ctx, &api.UpdateContainerRequest{Pod: gw, Container: c,
		LinuxResources: &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(200000)}}}); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, pods, "UpdateContainer")
	if g := find(podsNow(t, pods), gw.Uid); !g.Resizing {
		t.Error("not Resizing after UpdateContainer")
	}
	if err := rt.r.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: gw, Container: c}); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, pods, "PostUpdateContainer")
	if g := find(podsNow(t, pods), gw.Uid); g.Resizing {
		t.Error("still Resizing after PostUpdateContainer")
	}

	if err := rt.r.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: gw, Container: c}); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, pods, "RemoveContainer")
	if err := rt.r.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: gw}); err != nil {
		t.Fatal(err)
	}
	waitChanged(t, pods, "StopPodSandbox")
	if g := find(podsNow(t, pods), gw.Uid); g != nil {
		t.Errorf("a stopped pod is listed: %+v", g)
	}
	if err := rt.r.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: gw}); err != nil {
		t.Fatal(err)
	}
	if got := podsNow(t, pods); len(got) != 1 || got[0].UID != "uid-db" {
		t.Errorf("after the pod's removal: %+v; want the db pod only", got)
	}
}

func find(pods []podcgroup.Pod, uid string) *podcgroup.Pod {
	for i := range pods {
		if pods[i].UID == uid {
			return &pods[i]
		}
	}
	return nil
}

// In Runtime mode a missing NRI socket is not silence: the condition's
// message names agent.podSource, and the pods are unknown (not "none").
func TestPodsWithoutTheSocket(t *testing.T) {
	pods := nri.NewPods(nil)
	p := nri.New(filepath.Join(t.TempDir(), "nri.sock"), logr.Discard(), nri.WithPods(pods))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitMessage(t, p, "no NRI socket")
	if m := p.State().Message; !strings.Contains(m, "agent.podSource") || strings.Contains(m, "file path") {
		t.Errorf("NoSocket message in Runtime mode: %q; want it to name agent.podSource, not the file path", m)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer ccancel()
	if _, err := pods.Pods(cctx); !errors.Is(err, nri.ErrPodsUnknown) || !strings.Contains(err.Error(), "no NRI socket") {
		t.Errorf("Pods without a socket: %v; want ErrPodsUnknown saying there is no socket", err)
	}
	// Without a pod source the message stays as it was.
	q := nri.New(filepath.Join(t.TempDir(), "nri.sock"), logr.Discard())
	go func() { _ = q.Run(ctx) }()
	waitMessage(t, q, "no NRI socket")
	if m := q.State().Message; strings.Contains(m, "podSource") {
		t.Errorf("NoSocket message without a pod source names podSource: %q", m)
	}
}

// waitMessage waits for the plugin's state message to say what.
func waitMessage(t *testing.T, p *nri.Plugin, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.State().Message, what) {
		if time.Now().After(deadline) {
			t.Fatalf("plugin state %+v, want a message saying %q", p.State(), what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
