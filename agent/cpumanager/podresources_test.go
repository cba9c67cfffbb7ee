package cpumanager

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"latencytier.io/latencytier/agent/cpumanager/podresourcestest"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
)

type kubelet = podresourcestest.Kubelet

var container = podresourcestest.Container

func serve(t *testing.T, root *host.Root, k *kubelet) { podresourcestest.Serve(t, root, k) }

// newRoot is a host root with 8 online CPUs and a checkpoint that
// disagrees with every kubelet below (policy static, pod "ckpt" on 6-7), so
// a test sees which source was read.
func newRoot(t *testing.T) *host.Root {
	t.Helper()
	dir, err := os.MkdirTemp("", "pr") // short: a unix socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	root := host.New(dir)
	for path, body := range map[string]string{
		root.Sys("devices", "system", "cpu", "online"): "0-7\n",
		root.KubeletDir("cpu_manager_state"):           `{"policyName":"static","defaultCpuSet":"0-5","entries":{"ckpt":{"c":"6-7"}},"checksum":1}`,
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestReadPrefersPodResources(t *testing.T) {
	root := newRoot(t)
	serve(t, root, &kubelet{Allocatable: []int64{1, 2, 3, 4, 5, 6, 7}, Pods: []*podresourcesv1.PodResources{
		{Namespace: "trading", Name: "gw", Containers: []*podresourcesv1.ContainerResources{container("app", 4, 5), container("sidecar")}},
		{Namespace: "kube-system", Name: "dns", Containers: []*podresourcesv1.ContainerResources{container("coredns")}},
	}})
	pods := []podcgroup.Pod{{UID: "uid-gw", Namespace: "trading", Name: "gw"}, {UID: "uid-dns", Namespace: "kube-system", Name: "dns"}}
	s, err := ReadFor(root, pods)
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != SourcePodResources || s.Fallback != "" || s.PolicyName != PolicyStatic || !s.OwnsPlacement() {
		t.Fatalf("state = %+v; want static from the PodResources API", s)
	}
	if c, ok := s.PodCPUs("uid-gw"); !ok || c.String() != "4-5" {
		t.Errorf("PodCPUs(gw) = %s %v; want 4-5 (the sidecar holds none)", c, ok)
	}
	if _, ok := s.PodCPUs("uid-dns"); ok {
		t.Error("a pod on the shared pool has exclusive CPUs")
	}
	if _, ok := s.PodCPUs("ckpt"); ok {
		t.Error("the checkpoint's entry was read although the API answered")
	}
	if s.DefaultCPUSet.String() != "0-3,6-7" {
		t.Errorf("shared pool = %s; want the online CPUs but 4-5", s.DefaultCPUSet)
	}
	if !strings.Contains(s.Origin(), "PodResources API") {
		t.Errorf("Origin = %q", s.Origin())
	}
}

func TestReadPodResourcesPolicyNone(t *testing.T) {
	root := newRoot(t)
	// The none policy assigns no CPUs: GetAllocatableResources lists none.
	serve(t, root, &kubelet{Pods: []*podresourcesv1.PodResources{
		{Namespace: "trading", Name: "gw", Containers: []*podresourcesv1.ContainerResources{container("app")}}}})
	s, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != SourcePodResources || s.PolicyName != PolicyNone || s.OwnsPlacement() {
		t.Fatalf("state = %+v; want policy none from the API", s)
	}
}

func TestReadFallsBackToCheckpoint(t *testing.T) {
	root := newRoot(t)
	s, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != SourceCheckpoint || !strings.Contains(s.Fallback, "no PodResources socket") ||
		!strings.Contains(s.Origin(), "cpu_manager_state") {
		t.Fatalf("without a socket: source %q, fallback %q; want the checkpoint, saying why", s.Source, s.Fallback)
	}
	if c, ok := s.PodCPUs("ckpt"); !ok || c.String() != "6-7" {
		t.Errorf("checkpoint PodCPUs = %s %v", c, ok)
	}

	// A socket nobody answers on (kubelet stopped): the checkpoint again.
	if err := os.MkdirAll(filepath.Dir(SocketPath(root)), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", SocketPath(root))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	s, err = Read(root)
	if err != nil || s.Source != SourceCheckpoint || !strings.Contains(s.Fallback, "PodResources") {
		t.Fatalf("stale socket: %+v %v; want the checkpoint, saying why", s, err)
	}
}

// TestPodResourcesUntrusted: whatever listens on the socket is checked, and
// an answer that fails the checks is refused naming the field.
func TestPodResourcesUntrusted(t *testing.T) {
	for _, tt := range []struct {
		name  string
		k     *kubelet
		field string
	}{
		{"cpu too high", &kubelet{Allocatable: []int64{1}, Pods: []*podresourcesv1.PodResources{
			{Namespace: "a", Name: "b", Containers: []*podresourcesv1.ContainerResources{container("c", 9000)}}}}, "pod a/b container c cpu_ids: CPU 9000"},
		{"negative allocatable", &kubelet{Allocatable: []int64{-1}}, "GetAllocatableResources cpu_ids: CPU -1"},
		{"no namespace", &kubelet{Pods: []*podresourcesv1.PodResources{{Name: "b"}}}, "pod_resources[0].namespace: empty"},
		{"long container", &kubelet{Pods: []*podresourcesv1.PodResources{
			{Namespace: "a", Name: "b", Containers: []*podresourcesv1.ContainerResources{container(strings.Repeat("x", 300))}}}}, "pod a/b containers[0].name: 300 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := newRoot(t)
			serve(t, root, tt.k)
			_, err := ReadPodResources(context.Background(), root)
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("err = %v; want it to name %q", err, tt.field)
			}
			s, err := Read(root)
			if err != nil || s.Source != SourceCheckpoint || !strings.Contains(s.Fallback, tt.field) {
				t.Fatalf("Read = %+v %v; want the checkpoint, saying why", s, err)
			}
		})
	}
}
