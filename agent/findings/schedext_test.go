package findings

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/schedext"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// A sched_ext scheduler someone else loaded is a finding naming it, and
// saying what the profile's own settings mean under it; the fair class, or
// a state nobody could read, is none.
func TestSchedExtLoaded(t *testing.T) {
	lavd := schedext.State{Supported: true, State: schedext.StateEnabled, Ops: "scx_lavd", SwitchAll: true, EnableSeq: 4}
	partial := lavd
	partial.SwitchAll = false
	disabling := schedext.State{Supported: true, State: schedext.StateDisabling, EnableSeq: 4}
	escaped := lavd
	escaped.Ops = `evil\x1b[2J` // as schedext escapes it
	ms := &metav1.Duration{Duration: time.Millisecond}
	tuned := v1alpha1.SchedulerSpec{BaseSlice: ms, MigrationCost: ms, Autogroup: ptr.To(v1alpha1.Disabled), RTRuntime: ptr.To("950ms")}
	for _, tc := range []struct {
		name    string
		obs     Observation
		want    []string // nil: no finding
		notWant []string
	}{
		{"no sched_ext in the kernel", Observation{SchedExt: schedext.State{EnableSeq: -1}}, nil, nil},
		{"sched_ext idle", Observation{SchedExt: schedext.State{Supported: true, State: schedext.StateDisabled, EnableSeq: 3}}, nil, nil},
		{"state unreadable", Observation{SchedExt: schedext.State{Supported: true, EnableSeq: -1, Problem: "state: x"}}, nil, nil},
		{"every task, the profile's knobs", Observation{SchedExt: lavd, Scheduler: tuned, CPUQuota: true}, []string{
			`sched_ext scheduler "scx_lavd" runs every normal task (loaded outside latencytier, enable_seq 4)`,
			`fair-class settings (autogroup, migrationCost, baseSlice) stay written but do not act on the tasks "scx_lavd" runs`,
			"rtRuntime still bounds real-time tasks",
			`pod CPU limits (cpu.max) hold for its tasks only if "scx_lavd" enforces them`,
			"this profile's cpuQuota changes limits it may not enforce",
		}, nil},
		{"every task, no knobs set", Observation{SchedExt: lavd}, []string{`"scx_lavd" runs every normal task`, "cpu.max"},
			[]string{"fair-class settings", "rtRuntime", "cpuQuota"}},
		{"partial mode", Observation{SchedExt: partial, Scheduler: v1alpha1.SchedulerSpec{BaseSlice: ms}}, []string{
			"runs the tasks that asked for SCHED_EXT (partial mode)",
			"fair-class settings (baseSlice) act only on the tasks it left in the fair class"}, []string{"stay written"}},
		{"disabling, name gone", Observation{SchedExt: disabling}, []string{"a sched_ext scheduler is disabling (loaded outside latencytier, enable_seq 4)"}, nil},
		{"a hostile name stays escaped", Observation{SchedExt: escaped}, []string{`sched_ext scheduler "evil\x1b[2J" runs`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *v1alpha1.Finding
			for _, f := range Judge(tc.obs) {
				if f.Type == FindingSchedExtLoaded {
					got = &f
				}
			}
			if tc.want == nil {
				if got != nil {
					t.Fatalf("unexpected finding: %s", got.Message)
				}
				return
			}
			if got == nil {
				t.Fatal("no SchedExtSchedulerLoaded finding")
			}
			if got.Severity != SeverityWarning {
				t.Errorf("severity %s, want Warning", got.Severity)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Message, w) {
					t.Errorf("message lacks %q:\n%s", w, got.Message)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(got.Message, w) {
					t.Errorf("message has %q:\n%s", w, got.Message)
				}
			}
			if strings.Contains(got.Message, "\x1b") {
				t.Errorf("a raw escape reached the message: %q", got.Message)
			}
		})
	}
}

// Every typed scheduler knob is either a fair-class knob the finding lists
// or rtRuntime: a knob added to the catalogue without a line in
// setSchedulerKnobs would silently drop out of the message.
func TestSetSchedulerKnobsCoversTheCatalogue(t *testing.T) {
	ms := &metav1.Duration{Duration: time.Millisecond}
	all := v1alpha1.SchedulerSpec{Autogroup: ptr.To(v1alpha1.Disabled), NumaBalancing: ptr.To(v1alpha1.Disabled),
		MigrationCost: ms, BaseSlice: ms, Latency: ms, WakeupGranularity: ms, RTRuntime: ptr.To("950ms")}
	fair, rt := setSchedulerKnobs(all)
	n := len(fair)
	if rt {
		n++
	}
	if n != len(knobs.SchedulerKnobs) {
		t.Errorf("a spec setting every field lists %v (rtRuntime %v): %d of the catalogue's %d knobs", fair, rt, n, len(knobs.SchedulerKnobs))
	}
}
