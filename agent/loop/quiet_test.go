package loop

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// shuffled is the API client with the informer cache's one liberty: pods
// are listed in a different order on every call.
type shuffled struct {
	client.Client
	rnd     *rand.Rand
	patches atomic.Int32 // status patches sent
}

func (s *shuffled) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := s.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if pl, ok := list.(*corev1.PodList); ok {
		s.rnd.Shuffle(len(pl.Items), func(i, j int) { pl.Items[i], pl.Items[j] = pl.Items[j], pl.Items[i] })
	}
	return nil
}

func (s *shuffled) Status() client.SubResourceWriter {
	return countingWriter{s.Client.Status(), &s.patches}
}

type countingWriter struct {
	client.SubResourceWriter
	n *atomic.Int32
}

func (w countingWriter) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	w.n.Add(1)
	return w.SubResourceWriter.Patch(ctx, obj, p, opts...)
}

// quietSetup creates LatencyNode name with a spec that removes the quota of
// opted-in pods, and n opted-in pods on that node whose cgroups (v2,
// cgroupfs driver, a limited container each) are in the fake host; extra
// adds files to the host. It returns the host and the agent's reconciler
// (its client shuffles pod lists and counts status patches).
func quietSetup(t *testing.T, c client.Client, name string, n int, extra map[string]string) (*host.Root, *Reconciler, *shuffled) {
	t.Helper()
	ctx := context.Background()
	files := map[string]string{}
	for i := range n {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gw-%d", i), Namespace: "default",
			Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}},
			Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		dir := "sys/fs/cgroup/kubepods/burstable/pod" + string(pod.UID)
		files[dir+"/cpu.max"] = "50000 100000"
		files[dir+fmt.Sprintf("/%064d/cpu.max", i)] = "50000 100000"
	}
	for k, v := range extra {
		files[k] = v
	}
	root := fakeHostWith(t, files)
	sp := spec()
	sp.Tuning.CPUQuota = &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove, NamespaceSelector: &v1alpha1.NamespaceSelector{}}
	if err := c.Create(ctx, &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sp}); err != nil {
		t.Fatal(err)
	}
	sc := &shuffled{Client: c, rnd: rand.New(rand.NewSource(1))}
	r := &Reconciler{Client: sc, NodeName: name, Root: root, Resync: time.Second,
		Engine: &apply.Engine{Root: root, Log: testr.New(t)}}
	return root, r, sc
}

// fakeHostWith is fakeHost plus files.
func fakeHostWith(t *testing.T, files map[string]string) *host.Root {
	root := fakeHost(t)
	for rel, content := range files {
		testroot.Write(t, root.Path(rel), content)
	}
	return root
}

// pass runs one agent pass, as the workqueue would, and fails the test on a
// reconcile error.
func pass(t *testing.T, r *Reconciler, name string) reconcile.Result {
	t.Helper()
	ctx := ctrl.LoggerInto(context.Background(), testr.New(t))
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	return res
}

// With five opted-in pods listed in a new order on every pass and nothing
// changing on the node, the agent writes its status once in 20 passes.
func TestStatusQuietWithShuffledPods(t *testing.T) {
	c, _ := startAPI(t)
	_, r, sc := quietSetup(t, c, "node-q", 5, nil)
	ln := &v1alpha1.LatencyNode{}
	var rvs []string
	for range 20 {
		pass(t, r, "node-q")
		if err := c.Get(context.Background(), types.NamespacedName{Name: "node-q"}, ln); err != nil {
			t.Fatal(err)
		}
		if len(rvs) == 0 || rvs[len(rvs)-1] != ln.ResourceVersion {
			rvs = append(rvs, ln.ResourceVersion)
		}
	}
	if !conditionIs(ln, v1alpha1.NodeApplied, metav1.ConditionTrue) || countPrefix(ln.Status.Settings, "cpuquota/") != 10 {
		t.Fatalf("the pods' quotas are not in status: %+v", ln.Status.Settings)
	}
	if n := sc.patches.Load(); n > 1 || len(rvs) > 2 {
		t.Errorf("%d status patches, %d resourceVersions in 20 passes with nothing changing; want at most 1 write", n, len(rvs)-1)
	}
}

func countPrefix(rs []v1alpha1.SettingResult, prefix string) int {
	n := 0
	for _, r := range rs {
		if strings.HasPrefix(r.Setting, prefix) {
			n++
		}
	}
	return n
}

// irqbalance rewriting an IRQ's affinity before every pass is reported once:
// the Drifted condition carries no time of the latest re-assertion, and the
// re-assertions are no new apply (lastAppliedTime stays).
func TestStatusQuietWhileIRQBalanceRuns(t *testing.T) {
	c, _ := startAPI(t)
	root, r, sc := quietSetup(t, c, "node-i", 2, nil)
	affinity := root.Proc("irq", "24", "smp_affinity_list")
	ln := &v1alpha1.LatencyNode{}
	for i := range 8 {
		if i > 0 {
			testroot.Write(t, affinity, "0-1") // irqbalance, every 10s
			// Status times have seconds: let passes fall in different ones.
			time.Sleep(1100 * time.Millisecond)
		}
		pass(t, r, "node-i")
		if testroot.Read(t, affinity) != "0" {
			t.Fatalf("pass %d: irq 24 not re-asserted", i)
		}
	}
	if err := c.Get(context.Background(), types.NamespacedName{Name: "node-i"}, ln); err != nil {
		t.Fatal(err)
	}
	if !conditionIs(ln, v1alpha1.NodeDrifted, metav1.ConditionTrue) {
		t.Fatalf("Drifted not reported: %+v", ln.Status.Conditions)
	}
	// One write for the first apply, one for the first drift.
	if n := sc.patches.Load(); n > 2 {
		t.Errorf("%d status patches in 8 passes with the same drift each pass; want 2", n)
	}
}

// bigHostFiles is a 2x192-core SMT host (768 threads, 384 SMT groups) that
// isolates every odd thread on the kernel command line, a list no range
// shortens.
func bigHostFiles() map[string]string {
	files := map[string]string{"sys/devices/system/cpu/online": "0-767"}
	var odd []string
	for cpu := range 768 {
		files[fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu)] = fmt.Sprintf("%d,%d", cpu%384, cpu%384+384)
		if cpu%2 == 1 {
			odd = append(odd, fmt.Sprint(cpu))
		}
	}
	list := strings.Join(odd, ",")
	files["proc/cmdline"] = "ro isolcpus=managed_irq," + list + " nohz_full=" + list + " rcu_nocbs=" + list
	return files
}

// The status of a big host is accepted by the real API server: its kernel
// facts are bounded to the CRD's limits.
func TestBigHostStatusAccepted(t *testing.T) {
	c, _ := startAPI(t)
	_, r, _ := quietSetup(t, c, "node-big", 1, bigHostFiles())
	pass(t, r, "node-big")
	ln := &v1alpha1.LatencyNode{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: "node-big"}, ln); err != nil {
		t.Fatal(err)
	}
	k := ln.Status.Kernel
	if k == nil || !conditionIs(ln, v1alpha1.NodeApplied, metav1.ConditionTrue) {
		t.Fatalf("status not written: %+v", ln.Status)
	}
	if strings.Join(k.SMTSiblings, " ") != "0-383+384" || len(k.CmdlineIsolation) != 3 {
		t.Errorf("kernel facts = %q, %q", k.SMTSiblings, k.CmdlineIsolation)
	}
	// The next pass finds the server's copy equal: no write.
	rv := ln.ResourceVersion
	pass(t, r, "node-big")
	if err := c.Get(context.Background(), types.NamespacedName{Name: "node-big"}, ln); err != nil || ln.ResourceVersion != rv {
		t.Errorf("bounded status rewritten on the next pass (rv %s -> %s, %v)", rv, ln.ResourceVersion, err)
	}
}
