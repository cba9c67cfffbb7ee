package cpumanager

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
)

// Sources a State is read from.
const (
	// SourcePodResources is kubelet's PodResources gRPC API, the supported
	// interface: what device plugins and monitoring agents read.
	SourcePodResources = "podresources"
	// SourceCheckpoint is kubelet's internal checkpoint cpu_manager_state,
	// read only where the API is unavailable: its format is not an API.
	SourceCheckpoint = "checkpoint"
)

// Bounds on what kubelet's socket answers: whoever listens there is not
// trusted further than its answers are checked.
const (
	// callTimeout bounds both calls together.
	callTimeout = 5 * time.Second
	// maxMessage bounds one answer (kubelet's own client allows 16 MiB).
	maxMessage = 16 << 20
	// maxCPUID is the highest CPU number accepted (the kernel's largest
	// NR_CPUS is 8192).
	maxCPUID = 8191
	// maxName bounds a pod, namespace or container name (a DNS subdomain).
	maxName = 253
)

// ErrNoSocket is returned by ReadPodResources when kubelet serves no
// PodResources socket under the host root.
var ErrNoSocket = errors.New("kubelet serves no PodResources socket")

// SocketPath is kubelet's PodResources socket under root:
// /var/lib/kubelet/pod-resources/kubelet.sock.
func SocketPath(root *host.Root) string {
	return root.KubeletDir("pod-resources", "kubelet.sock")
}

// ReadPodResources asks kubelet's PodResources API (v1) for every
// container's exclusive CPUs (List) and the CPUs its CPU manager may assign
// (GetAllocatableResources: none unless the policy assigns CPUs, which is
// how the API tells the static policy from none). Entries are keyed by pod
// namespace/name, as the API names pods; ForPods keys them by UID.
func ReadPodResources(ctx context.Context, root *host.Root) (*State, error) {
	path, err := socket(root)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources %s: %w", path, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	c := podresourcesv1.NewPodResourcesListerClient(conn)
	alloc, err := c.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources %s: GetAllocatableResources: %w", path, err)
	}
	list, err := c.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources %s: List: %w", path, err)
	}
	online, err := cpulist.Online(root)
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources: shared pool: %w", err)
	}
	return fromPodResources(alloc, list, online)
}

// socket is the absolute path of kubelet's socket, or ErrNoSocket.
func socket(root *host.Root) (string, error) {
	path, err := filepath.Abs(SocketPath(root))
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w at %s", ErrNoSocket, path)
	}
	if err != nil {
		return "", fmt.Errorf("kubelet PodResources: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return "", fmt.Errorf("kubelet PodResources: %s is not a socket", path)
	}
	return path, nil
}

// fromPodResources checks kubelet's answers and turns them into a State:
// policy static when kubelet may assign CPUs, the shared pool the online
// CPUs no container holds exclusively.
func fromPodResources(alloc *podresourcesv1.AllocatableResourcesResponse, list *podresourcesv1.ListPodResourcesResponse, online cpuset.CPUSet) (*State, error) {
	allocatable, err := cpus(alloc.GetCpuIds())
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources GetAllocatableResources cpu_ids: %w", err)
	}
	s := &State{PolicyName: PolicyNone, Source: SourcePodResources, Entries: map[string]map[string]cpuset.CPUSet{},
		byName: map[string]map[string]cpuset.CPUSet{}}
	if !allocatable.IsEmpty() {
		s.PolicyName = PolicyStatic
	}
	held := cpuset.New()
	for i, p := range list.GetPodResources() {
		key := p.GetNamespace() + "/" + p.GetName()
		if err := checkName(p.GetNamespace()); err != nil {
			return nil, fmt.Errorf("kubelet PodResources List pod_resources[%d].namespace: %w", i, err)
		}
		if err := checkName(p.GetName()); err != nil {
			return nil, fmt.Errorf("kubelet PodResources List pod_resources[%d].name: %w", i, err)
		}
		for j, c := range p.GetContainers() {
			if err := checkName(c.GetName()); err != nil {
				return nil, fmt.Errorf("kubelet PodResources List pod %s containers[%d].name: %w", key, j, err)
			}
			set, err := cpus(c.GetCpuIds())
			if err != nil {
				return nil, fmt.Errorf("kubelet PodResources List pod %s container %s cpu_ids: %w", key, c.GetName(), err)
			}
			if set.IsEmpty() {
				continue // shared pool: not an exclusive assignment
			}
			if s.byName[key] == nil {
				s.byName[key] = map[string]cpuset.CPUSet{}
			}
			s.byName[key][c.GetName()] = set
			held = held.Union(set)
		}
	}
	if s.PolicyName == PolicyStatic {
		s.DefaultCPUSet = online.Difference(held)
	}
	return s, nil
}

func cpus(ids []int64) (cpuset.CPUSet, error) {
	out := make([]int, 0, len(ids))
	for _, id := range ids {
		if id < 0 || id > maxCPUID {
			return cpuset.New(), fmt.Errorf("CPU %d outside 0-%d", id, maxCPUID)
		}
		out = append(out, int(id))
	}
	return cpuset.New(out...), nil
}

func checkName(n string) error {
	if n == "" {
		return errors.New("empty")
	}
	if len(n) > maxName {
		return fmt.Errorf("%d bytes, longer than %d", len(n), maxName)
	}
	return nil
}
