package rtsched

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func TestParseRequestIsStrict(t *testing.T) {
	good := map[string]Value{"fifo:50": {"fifo", 50}, "rr:1": {"rr", 1}, "fifo:99": {"fifo", 99}}
	for s, want := range good {
		if v, err := parseRequest(s); err != nil || v != want {
			t.Errorf("ParseRequest(%q) = %+v, %v; want %+v", s, v, err, want)
		}
	}
	for _, s := range []string{"", "fifo", "fifo:", "fifo:0", "fifo:100", "fifo:050", "fifo:+5", "fifo:-1", "FIFO:50",
		"fifo :50", "fifo:5 ", "other:0", "batch:1", "idle:0", "deadline:5", "fifo:50:1", "rr:1\n", "fifo:99999999999999999999"} {
		if v, err := parseRequest(s); err == nil {
			t.Errorf("ParseRequest(%q) = %+v, want an error", s, v)
		}
	}
}

func TestParseValueRoundTrips(t *testing.T) {
	for _, s := range []string{"other:0", "other:-20", "batch:19", "idle:0", "fifo:1", "rr:99"} {
		v, err := parseValue(s)
		if err != nil || v.String() != s {
			t.Errorf("ParseValue(%q) = %v, %v", s, v, err)
		}
	}
	for _, s := range []string{"other:20", "other:-21", "fifo:0", "policy6:0", "other:05", "other:"} {
		if _, err := parseValue(s); err == nil {
			t.Errorf("ParseValue(%q) accepted", s)
		}
	}
}

func TestCheckGrantsWithinTheProfile(t *testing.T) {
	rt := &v1alpha1.RealtimeSpec{NamespaceSelector: &v1alpha1.NamespaceSelector{}, Policies: []v1alpha1.RealtimePolicy{v1alpha1.RealtimeFIFO}, MaxPriority: 40}
	unlimited := &v1alpha1.SchedulerSpec{RTRuntime: ptr.To("Unlimited")}
	isolated := &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("1")}
	reservedOnly := &v1alpha1.CPUSpec{Reserved: ptr.To("0")}
	// A LatencyNode spec the CRD would reject (maxPriority 60 without the
	// ceiling) is held below the IRQ threads all the same.
	high := &v1alpha1.RealtimeSpec{MaxPriority: 60}
	above := &v1alpha1.RealtimeSpec{MaxPriority: 60, PriorityCeiling: v1alpha1.CeilingAboveIRQThreads}
	cases := []struct {
		name  string
		t     v1alpha1.TuningSpec
		ask   string
		field string // "" when granted
	}{
		{"granted", v1alpha1.TuningSpec{Realtime: rt, CPUs: isolated}, "fifo:40", ""},
		{"priority-above-max", v1alpha1.TuningSpec{Realtime: rt, CPUs: isolated}, "fifo:41", FieldMaxPriority},
		{"policy-not-allowed", v1alpha1.TuningSpec{Realtime: rt, CPUs: isolated}, "rr:10", FieldPolicies},
		{"malformed", v1alpha1.TuningSpec{Realtime: rt, CPUs: isolated}, "fifo:high", v1alpha1.SchedPolicyAnnotation},
		{"defaults-allow-rr-up-to-40", v1alpha1.TuningSpec{Realtime: &v1alpha1.RealtimeSpec{}, CPUs: isolated}, "rr:40", ""},
		{"defaults-max-40", v1alpha1.TuningSpec{Realtime: &v1alpha1.RealtimeSpec{}, CPUs: isolated}, "rr:41", FieldMaxPriority},
		{"irq-threads-priority", v1alpha1.TuningSpec{Realtime: high, CPUs: isolated}, "fifo:50", FieldMaxPriority},
		{"below-irq-threads", v1alpha1.TuningSpec{Realtime: high, CPUs: isolated}, "fifo:49", ""},
		{"ceiling-raised", v1alpha1.TuningSpec{Realtime: above, CPUs: isolated}, "fifo:60", ""},
		{"no-isolated", v1alpha1.TuningSpec{Realtime: rt}, "fifo:10", FieldIsolated},
		{"reserved-only", v1alpha1.TuningSpec{Realtime: rt, CPUs: reservedOnly}, "fifo:10", FieldIsolated},
		{"unlimited-without-isolated", v1alpha1.TuningSpec{Realtime: rt, Scheduler: unlimited}, "fifo:10", FieldIsolated},
		{"unlimited-with-isolated", v1alpha1.TuningSpec{Realtime: rt, Scheduler: unlimited, CPUs: isolated}, "fifo:10", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v, no := Check(tc.t, tc.ask)
			switch {
			case tc.field == "" && no != nil:
				t.Fatalf("refused: %+v", no)
			case tc.field == "" && v.String() != tc.ask:
				t.Fatalf("granted %s, asked %s", v, tc.ask)
			case tc.field != "" && (no == nil || no.Field != tc.field):
				t.Fatalf("got %+v, want a refusal by %s", no, tc.field)
			case no != nil && !strings.Contains(no.Message, tc.field):
				t.Fatalf("message %q does not name %s", no.Message, tc.field)
			}
		})
	}
}
