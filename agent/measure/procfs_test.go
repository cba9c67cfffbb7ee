package measure

import (
	"context"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/go-logr/logr/testr"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/hostfixture"
	"latencytier.io/latencytier/agent/internal/testroot"
)

// taskRoot is the shared fixture: one SCHED_FIFO task allowed on CPU 1 and
// one real-time kernel thread (hostfixture.RTTasks).
func taskRoot(t *testing.T, runDelay, slices string) *host.Root {
	return hostfixture.RTTasks(t, runDelay, slices)
}

// The per-task reads (stat, status, schedstat, PSI) go through the host
// root: a temp-dir root stands in for the host's /proc.
func TestTaskReadsThroughRoot(t *testing.T) {
	root := taskRoot(t, "2000", "10")

	m := New(root, testr.New(t), WithAttach(AttachNone))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testroot.Write(t, root.Proc("4242", "task", "4242", "schedstat"), "100 5000 13\n")
	res, err := m.Collect(context.Background(), Input{Isolated: cpuset.New(1), Reserved: cpuset.New(0)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Latency == nil || res.Latency.Source != SourceSchedstat {
		t.Fatalf("latency %+v", res.Latency)
	}
	if res.Latency.PSICPUSomeAvg10 != "1.50" {
		t.Errorf("PSI some avg10 %q, want 1.50", res.Latency.PSICPUSomeAvg10)
	}
	got := map[string]int64{}
	for _, c := range res.Latency.Classes {
		got[c.Class] = c.Samples
	}
	if got[ClassNode] != 3 || got[ClassIsolated] != 3 || got[ClassReserved] != 0 {
		t.Errorf("samples per class %v, want the task's 3 timeslices on isolated CPU 1", got)
	}
}
