package measure

import (
	"context"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/go-logr/logr/testr"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
)

// taskRoot is a temp-dir root holding one SCHED_FIFO task allowed on CPU 1
// (comm with spaces and parentheses, stat fields from a real 6.x kernel
// line) and one real-time kernel thread, which findings leave out.
func taskRoot(t *testing.T, runDelay, slices string) *host.Root {
	stat := "4242 (my (weird) app) S 1 4242 4242 0 -1 4194560 300 0 0 0 5 3 0 0 -51 0 1 0 12345 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 50 1 0 0 0 0 0 0 0 0 0 0 0\n"
	kthread := "7 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 0 0 0 -51 0 1 0 3 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 50 1 0 0 0 0 0 0 0 0 0 0 0\n"
	return testroot.Files(t, map[string]string{
		"proc/4242/task/4242/stat":      stat,
		"proc/4242/task/4242/status":    "Name:\tmy (weird) app\nCpus_allowed_list:\t1\n",
		"proc/4242/task/4242/schedstat": "100 " + runDelay + " " + slices + "\n",
		"proc/7/task/7/stat":            kthread,
		"proc/7/task/7/status":          "Name:\tksoftirqd/1\nCpus_allowed_list:\t1\n",
		"proc/7/task/7/schedstat":       "0 0 0\n",
		"proc/pressure/cpu":             "some avg10=1.50 avg60=0.20 avg300=0.00 total=123\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
	})
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
