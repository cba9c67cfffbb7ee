package window

import (
	"context"
	"os"
	"testing"

	"github.com/go-logr/logr/testr"

	"latencytier.io/latencytier/agent/findings"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/measure"
)

// Each window carries the scheduling class at its end and, when the class
// moved between its two ends, how: a sched_ext scheduler loaded, reloaded
// (the same name at both ends, enable_seq moved) or gone. The window after
// it, with the class steady, carries no change. A loaded scheduler is also
// a finding naming it.
func TestWindowCarriesTheSchedulerClassChange(t *testing.T) {
	dir := "sys/kernel/sched_ext/"
	root := testroot.Files(t, map[string]string{dir + "state": "disabled\n", dir + "switch_all": "0\n", dir + "enable_seq": "3\n"})
	set := func(files map[string]string) {
		t.Helper()
		for k, v := range files {
			if v == "" {
				if err := os.Remove(root.Path(k)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			testroot.Write(t, root.Path(k), v)
		}
	}
	m := New(measure.New(root, testr.New(t), measure.WithAttach(measure.AttachNone)))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	loaded := map[string]string{dir + "state": "enabled\n", dir + "switch_all": "1\n", dir + "enable_seq": "4\n", dir + "root/ops": "scx_lavd\n"}
	for _, step := range []struct {
		name          string
		files         map[string]string
		class, change string
		finding       bool
	}{
		{"steady fair", nil, "fair", "", false},
		{"scx_lavd loaded", loaded, "ext:scx_lavd", "fair → ext:scx_lavd (enable_seq 3→4)", true},
		{"scx_lavd steady", nil, "ext:scx_lavd", "", true},
		{"scx_lavd reloaded", map[string]string{dir + "enable_seq": "5\n"}, "ext:scx_lavd",
			"ext:scx_lavd at both ends, but a sched_ext scheduler was loaded in between (enable_seq 4→5)", true},
		{"scx_lavd gone", map[string]string{dir + "state": "disabled\n", dir + "switch_all": "0\n", dir + "root/ops": ""},
			"fair", "ext:scx_lavd → fair", false},
	} {
		set(step.files)
		res, err := m.Collect(context.Background(), Input{})
		if err != nil {
			t.Fatal(err)
		}
		if res.SchedulerClass != step.class || res.SchedulerClassChange != step.change {
			t.Errorf("%s: class %q, change %q; want %q, %q", step.name, res.SchedulerClass, res.SchedulerClassChange, step.class, step.change)
		}
		if step.finding {
			mustFind(t, res.Findings, findings.FindingSchedExtLoaded, `sched_ext scheduler "scx_lavd" runs every normal task`)
		} else {
			mustNotFind(t, res.Findings, findings.FindingSchedExtLoaded)
		}
	}
}
