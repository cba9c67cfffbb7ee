package measure

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/api/v1alpha1"
)

func TestMeasurementDisabled(t *testing.T) {
	root := testroot.Files(t, map[string]string{})
	m := New(root, testr.New(t), WithAttach(AttachNone))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	res, err := m.Collect(context.Background(), Input{Tuning: v1alpha1.TuningSpec{
		Measurement:   &v1alpha1.MeasurementSpec{Source: v1alpha1.MeasurementDisabled},
		LatencyBudget: &v1alpha1.LatencyBudget{RunQueueP99: &metav1.Duration{Duration: time.Millisecond}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Latency != nil || res.RunQueueP99 != nil {
		t.Errorf("measured although disabled: %+v", res.Latency)
	}
	if _, err := New(root, testr.New(t)).Collect(context.Background(), Input{}); err == nil {
		t.Error("Collect before Start succeeded")
	}
}

func TestPrintLog2MatchesRunqlat(t *testing.T) {
	var out bytes.Buffer
	PrintLog2(&out, []uint64{4, 8, 0, 2}, "usecs")
	want := "" +
		"     usecs               : count    distribution\n" +
		"         0 -> 1          : 4        |********************                    |\n" +
		"         2 -> 3          : 8        |****************************************|\n" +
		"         4 -> 7          : 0        |                                        |\n" +
		"         8 -> 15         : 2        |**********                              |\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
