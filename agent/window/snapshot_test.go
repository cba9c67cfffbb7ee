package window

import (
	"context"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/measure"

	"latencytier.io/latencytier/agent/findings"

	"github.com/go-logr/logr/testr"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/snapshot"
	"latencytier.io/latencytier/api/v1alpha1"
)

// A window decides from the snapshot of the pass that held the tuning: it
// reads no /proc/cmdline of its own, and the findings follow the snapshot
// (here one whose command line lacks the isolation flags).
func TestWindowUsesThePassSnapshot(t *testing.T) {
	root := testroot.Files(t, map[string]string{
		"proc/cmdline":                  "ro isolcpus=managed_irq,1 nohz_full=1 rcu_nocbs=1\n",
		"sys/devices/system/cpu/online": "0-1",
	})
	tuning := v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("1")},
		Measurement: &v1alpha1.MeasurementSpec{Source: v1alpha1.MeasurementDisabled}}
	node := snapshot.Read(root, tuning)
	node.Cmdline = "ro"
	m := New(measure.New(root, testr.New(t), measure.WithAttach(measure.AttachNone)))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var cmdlineReads int
	root.Observe(func(p string) {
		if strings.HasSuffix(p, "/proc/cmdline") {
			cmdlineReads++
		}
	})
	t.Cleanup(func() { root.Observe(nil) })
	res, err := m.Collect(context.Background(), Input{Tuning: tuning, Node: &node})
	if err != nil {
		t.Fatal(err)
	}
	if cmdlineReads != 0 {
		t.Errorf("a window read /proc/cmdline %d times, want none (the pass's snapshot has it)", cmdlineReads)
	}
	var found bool
	for _, f := range res.Findings {
		found = found || f.Type == findings.FindingCmdline
	}
	if !found {
		t.Errorf("no %s finding from a snapshot whose command line lacks the flags: %+v", findings.FindingCmdline, res.Findings)
	}
}
