package controllers

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const heapNodes = 400

// BenchmarkNodeCacheHeap measures the heap a Node informer holds per node,
// for nodes that look like a kubelet's (images, addresses, capacity, five
// conditions, a status writer's managedFields), with the manager's cache
// transforms and without them.
//
//	go test ./controllers -run '^$' -bench NodeCacheHeap -benchtime 1x
func BenchmarkNodeCacheHeap(b *testing.B) {
	needSuite(b)
	ctx := context.Background()
	names := make([]string, heapNodes)
	for i := range names {
		names[i] = fmt.Sprintf("heap-n%03d", i)
		createKubeletNode(b, ctx, names[i])
	}
	b.Cleanup(func() {
		for _, n := range names {
			_ = client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}))
		}
	})
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithCancel(ctx)
		// Both caches stay alive until both are measured: the heap only
		// grows between the readings.
		m0 := heapAlloc()
		startNodeCache(b, ctx, trimNode)
		m1 := heapAlloc()
		startNodeCache(b, ctx, nil)
		m2 := heapAlloc()
		cancel()
		trimmed, full := float64(m1-m0)/heapNodes, float64(m2-m1)/heapNodes
		b.ReportMetric(full, "B/node-untrimmed")
		b.ReportMetric(trimmed, "B/node-trimmed")
		b.ReportMetric(full/trimmed, "x-smaller")
		time.Sleep(time.Second) // let the stopped informers go before the next round
	}
}

// startNodeCache starts a cache of the benchmark's nodes with transform
// and waits until it holds them all; it runs until ctx ends.
func startNodeCache(b *testing.B, ctx context.Context, transform func(any) (any, error)) {
	b.Helper()
	c, err := cache.New(testEnv.Config, cache.Options{Scheme: NewScheme(), ByObject: map[client.Object]cache.ByObject{
		&corev1.Node{}: {Label: labels.SelectorFromSet(labels.Set{"heap": "bench"}), Transform: transform},
	}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.GetInformer(ctx, &corev1.Node{}); err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		b.Fatal("node cache never synced")
	}
	var list corev1.NodeList
	if err := c.List(ctx, &list); err != nil || len(list.Items) != heapNodes {
		b.Fatalf("cache holds %d nodes (%v)", len(list.Items), err)
	}
}

func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// createKubeletNode creates a node and writes a status shaped like a real
// kubelet's, through the status subresource as the kubelet does.
func createKubeletNode(b *testing.B, ctx context.Context, name string) {
	b.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"heap": "bench", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"node.kubernetes.io/instance-type": "m6i.4xlarge", "topology.kubernetes.io/zone": "eu-west-1a",
	}, Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}, ProviderID: "aws:///eu-west-1a/i-0123456789abcdef0"}}
	if err := k8s.Create(ctx, n); err != nil {
		b.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	qty := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	n.Status = corev1.NodeStatus{Capacity: qty, Allocatable: qty,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.1.17"}, {Type: corev1.NodeHostName, Address: name}},
		NodeInfo: corev1.NodeSystemInfo{MachineID: "0123456789abcdef0123456789abcdef", SystemUUID: "ec2a1b2c-3d4e-5f60-7182-93a4b5c6d7e8",
			BootID: "6f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", KernelVersion: "6.1.0-28-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)",
			ContainerRuntimeVersion: "containerd://1.7.24", KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64"},
	}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable, corev1.NodeReady} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse,
			LastHeartbeatTime: now, LastTransitionTime: now, Reason: "Kubelet" + string(t), Message: "kubelet reports " + string(t)})
	}
	for i := range 40 {
		repo := fmt.Sprintf("registry.example.com/team-%d/service-%d", i%7, i)
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{SizeBytes: int64(50_000_000 + i*1000), Names: []string{
			fmt.Sprintf("%s@sha256:%064x", repo, i*7919+1), repo + ":v1." + fmt.Sprint(i)}})
	}
	if err := k8s.Status().Update(ctx, n); err != nil {
		b.Fatal(err)
	}
}
