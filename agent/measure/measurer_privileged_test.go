//go:build privileged

package measure

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/measure/bpf"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/privtest"
)

// TestBPFAttachModes loads the program with each attach type the kernel
// offers and checks the per-class histograms add up to the node's.
func TestBPFAttachModes(t *testing.T) {
	needRoot(t)
	for _, attach := range []string{bpf.AttachTPBTF, bpf.AttachRawTP} {
		t.Run(attach, func(t *testing.T) {
			m := New(host.New("/"), testr.New(t), WithAttach(attach))
			if err := m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Tracer() == nil {
				if attach == bpf.AttachTPBTF {
					privtest.Missing(t, "tp_btf not available on this kernel: %s", m.Source())
				}
				t.Fatalf("raw_tp did not load: %s", m.Source())
			}
			ctx, cancel := context.WithCancel(context.Background())
			pingPong(ctx) // some wakeups of our own
			time.Sleep(300 * time.Millisecond)
			cancel()
			res, err := m.Collect(context.Background(), Input{Isolated: cpuset.New(1), Reserved: cpuset.New(0)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Latency == nil || res.Latency.Source != SourceEBPF || len(res.Latency.Classes) != 3 {
				t.Fatalf("latency %+v", res.Latency)
			}
			node, iso, res0 := res.Latency.Classes[0], res.Latency.Classes[1], res.Latency.Classes[2]
			if node.Class != ClassNode || iso.Class != ClassIsolated || res0.Class != ClassReserved {
				t.Fatalf("class order %s %s %s", node.Class, iso.Class, res0.Class)
			}
			if node.Samples == 0 || node.Samples != iso.Samples+res0.Samples {
				t.Errorf("samples node %d != isolated %d + reserved %d", node.Samples, iso.Samples, res0.Samples)
			}
			if node.P50 == nil || node.P99 == nil || node.P999 == nil || node.Max == nil ||
				node.P50.Duration > node.P99.Duration || node.P99.Duration > node.Max.Duration || len(node.Buckets) > maxBuckets {
				t.Errorf("node summary %+v", node)
			}
			if res.RunQueueP99 == nil || res.RunQueueP99.Duration != node.P99.Duration {
				t.Errorf("runQueueP99 %v, node p99 %v", res.RunQueueP99, node.P99)
			}
		})
	}
}

// TestSchedstatFallback measures with BPF switched off: numbers come from
// per-task run_delay, and PSI is read.
func TestSchedstatFallback(t *testing.T) {
	m := New(host.New("/"), testr.New(t), WithAttach(AttachNone))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Source(), SourceSchedstat) || !strings.Contains(m.Source(), "disabled") {
		t.Errorf("source %q", m.Source())
	}
	ctx, cancel := context.WithCancel(context.Background())
	pingPong(ctx)
	time.Sleep(300 * time.Millisecond)
	cancel()
	res, err := m.Collect(context.Background(), Input{Tuning: v1alpha1.TuningSpec{
		LatencyBudget: &v1alpha1.LatencyBudget{RunQueueP99: &metav1.Duration{Duration: 10 * time.Second}}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Latency == nil || res.Latency.Source != SourceSchedstat {
		t.Fatalf("latency %+v", res.Latency)
	}
	if node := res.Latency.Classes[0]; node.Samples == 0 || node.P99 == nil {
		t.Errorf("no schedstat samples: %+v", node)
	}
	if _, err := host.New("/").ReadString(host.New("/").Proc("pressure", "cpu")); err == nil && res.Latency.PSICPUSomeAvg10 == "" {
		t.Error("PSI not read although /proc/pressure/cpu exists")
	}
}
