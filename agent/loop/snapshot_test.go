package loop

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/host"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// readCounter counts the reads of each path through a host root.
type readCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func countReads(t *testing.T, root *host.Root) *readCounter {
	c := &readCounter{n: map[string]int{}}
	root.Observe(func(p string) {
		c.mu.Lock()
		c.n[p]++
		c.mu.Unlock()
	})
	t.Cleanup(func() { root.Observe(nil) })
	return c
}

func (c *readCounter) take(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n[path]
	clear(c.n)
	return n
}

// One pass, whatever its action, reads the kernel command line once: the
// node snapshot it takes at the start is what rendering (the boot plan),
// the kernel facts, the isolation account and status decide from.
func TestPassReadsTheCommandLineOnce(t *testing.T) {
	c, _ := startAPI(t)
	root := fakeHost(t)
	sp := spec()
	iso := "1"
	sp.Tuning.CPUs.Isolated = &iso
	sp.Tuning.CPUs.NamespaceSelector = &v1alpha1.NamespaceSelector{}
	sp.Tuning.BootParameters = &v1alpha1.BootParametersSpec{Policy: v1alpha1.BootReportOnly}
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-snap"}, Spec: sp}
	if err := c.Create(context.Background(), ln); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, NodeName: "node-snap", Root: root, Resync: time.Second,
		Engine: &apply.Engine{Root: root, Log: testr.New(t)}}
	reads := countReads(t, root)
	for _, action := range []v1alpha1.NodeAction{v1alpha1.ActionApply, v1alpha1.ActionBaseline, v1alpha1.ActionRevert} {
		moveTo(t, c, "node-snap", action, "r1", sp.Tuning)
		reads.take("")
		pass(t, r, "node-snap")
		if n := reads.take(root.Proc("cmdline")); n != 1 {
			t.Errorf("a %s pass read /proc/cmdline %d times, want once", action, n)
		}
	}
}
