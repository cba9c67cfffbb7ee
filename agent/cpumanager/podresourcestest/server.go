// Package podresourcestest serves kubelet's PodResources v1 API with fixed
// answers over a real gRPC server on a host root's kubelet socket
// (var/lib/kubelet/pod-resources/kubelet.sock): the wire protocol the agent
// speaks to kubelet on a node, for tests.
package podresourcestest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"latencytier.io/latencytier/agent/host"
)

// Kubelet answers List and GetAllocatableResources.
type Kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	// Allocatable are the CPUs the CPU manager may assign (none under the
	// none policy).
	Allocatable []int64
	// Pods are List's answer.
	Pods []*podresourcesv1.PodResources
}

// List returns k.Pods.
func (k *Kubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: k.Pods}, nil
}

// GetAllocatableResources returns k.Allocatable.
func (k *Kubelet) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	return &podresourcesv1.AllocatableResourcesResponse{CpuIds: k.Allocatable}, nil
}

// Serve serves k on root's kubelet socket until the test ends. The root's
// path must be short: a unix socket path has at most 107 bytes.
func Serve(t testing.TB, root *host.Root, k *Kubelet) {
	t.Helper()
	path := root.KubeletDir("pod-resources", "kubelet.sock")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, k)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
}

// Container is a container holding cpus exclusively (none: the shared pool).
func Container(name string, cpus ...int64) *podresourcesv1.ContainerResources {
	return &podresourcesv1.ContainerResources{Name: name, CpuIds: cpus}
}
