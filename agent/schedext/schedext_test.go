package schedext

import (
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
)

// ext is a /sys/kernel/sched_ext tree in the kernel's formats (every file
// ends in a newline, as sysfs_emit writes it), with overrides; "" removes
// a file.
func ext(over map[string]string) map[string]string {
	files := map[string]string{
		"sys/kernel/sched_ext/state":       "enabled\n",
		"sys/kernel/sched_ext/switch_all":  "1\n",
		"sys/kernel/sched_ext/nr_rejected": "0\n",
		"sys/kernel/sched_ext/hotplug_seq": "0\n",
		"sys/kernel/sched_ext/enable_seq":  "4\n",
		"sys/kernel/sched_ext/root/ops":    "scx_lavd\n",
		"sys/kernel/sched_ext/root/events": "SCX_EV_SELECT_CPU_FALLBACK 0\n",
	}
	for k, v := range over {
		if v == "" {
			delete(files, k)
			continue
		}
		files[k] = v
	}
	return files
}

func TestRead(t *testing.T) {
	cases := []struct {
		name    string
		files   map[string]string
		class   string
		str     string
		seq     int64
		problem string // a substring; "" wants none
	}{
		{name: "no sched_ext in the kernel", files: map[string]string{"sys/kernel/mm/x": "1\n"},
			class: ClassFair, str: "fair", seq: -1},
		{name: "built in, nothing loaded", files: ext(map[string]string{"sys/kernel/sched_ext/state": "disabled\n",
			"sys/kernel/sched_ext/switch_all": "0\n", "sys/kernel/sched_ext/enable_seq": "0\n",
			"sys/kernel/sched_ext/root/ops": "", "sys/kernel/sched_ext/root/events": ""}),
			class: ClassFair, str: "fair", seq: 0},
		{name: "a scheduler switched every task", files: ext(nil),
			class: ClassExt, str: "ext:scx_lavd", seq: 4},
		{name: "partial", files: ext(map[string]string{"sys/kernel/sched_ext/switch_all": "0\n"}),
			class: ClassExt, str: "ext:scx_lavd (partial)", seq: 4},
		{name: "enabling", files: ext(map[string]string{"sys/kernel/sched_ext/state": "enabling\n",
			"sys/kernel/sched_ext/switch_all": "0\n", "sys/kernel/sched_ext/enable_seq": "3\n"}),
			class: ClassExt, str: "ext:scx_lavd (enabling)", seq: 3},
		{name: "disabling, root already gone", files: ext(map[string]string{"sys/kernel/sched_ext/state": "disabling\n",
			"sys/kernel/sched_ext/root/ops": "", "sys/kernel/sched_ext/root/events": ""}),
			class: ClassExt, str: "ext (disabling)", seq: 4},
		{name: "a kernel without enable_seq", files: ext(map[string]string{"sys/kernel/sched_ext/enable_seq": ""}),
			class: ClassExt, str: "ext:scx_lavd", seq: -1},
		{name: "garbage state", files: ext(map[string]string{"sys/kernel/sched_ext/state": "on fire\n"}),
			class: ClassUnknown, str: "unknown", seq: 4, problem: `state: "on fire" is not one of`},
		{name: "state with a terminal escape", files: ext(map[string]string{"sys/kernel/sched_ext/state": "\x1b[31menabled\n"}),
			class: ClassUnknown, str: "unknown", seq: 4, problem: `\x1b[31menabled`},
		{name: "garbage numbers", files: ext(map[string]string{"sys/kernel/sched_ext/enable_seq": "-7\n",
			"sys/kernel/sched_ext/switch_all": "2\n"}),
			class: ClassExt, str: "ext:scx_lavd (partial)", seq: -1, problem: `switch_all: 2 is not 0 or 1; enable_seq: "-7" is not a count`},
		{name: "an endless state file", files: ext(map[string]string{"sys/kernel/sched_ext/state": strings.Repeat("enabled", 1000)}),
			class: ClassUnknown, str: "unknown", seq: 4, problem: "state: longer than 4096 bytes"},
		{name: "enabled without root/ops", files: ext(map[string]string{"sys/kernel/sched_ext/root/ops": ""}),
			class: ClassExt, str: "ext", seq: 4, problem: "root/ops: absent while state is enabled"},
		{name: "an empty ops name", files: ext(map[string]string{"sys/kernel/sched_ext/root/ops": "\n"}),
			class: ClassExt, str: "ext", seq: 4, problem: "root/ops: empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Read(testroot.Files(t, tc.files))
			if got := s.Class(); got != tc.class {
				t.Errorf("Class = %q, want %q (%+v)", got, tc.class, s)
			}
			if got := s.String(); got != tc.str {
				t.Errorf("String = %q, want %q", got, tc.str)
			}
			if s.EnableSeq != tc.seq {
				t.Errorf("EnableSeq = %d, want %d", s.EnableSeq, tc.seq)
			}
			if tc.problem == "" && s.Problem != "" || !strings.Contains(s.Problem, tc.problem) {
				t.Errorf("Problem = %q, want %q", s.Problem, tc.problem)
			}
			if strings.ContainsAny(s.Problem+s.Ops, "\x1b\n\x00") {
				t.Errorf("unescaped bytes reach the report: %q %q", s.Problem, s.Ops)
			}
		})
	}
}

// A foreign scheduler names itself: its name is escaped and cut to the
// status bound, whatever the file holds.
func TestReadEscapesAndBoundsTheOpsName(t *testing.T) {
	for _, ops := range []string{"evil\x1b[2J\nfake line\x00", strings.Repeat("é", 300), strings.Repeat("x", 4000)} {
		s := Read(testroot.Files(t, ext(map[string]string{"sys/kernel/sched_ext/root/ops": ops + "\n"})))
		if s.Ops == "" || strings.ContainsAny(s.Ops, "\x1b\n\x00") || len([]rune(s.Ops)) > OpsLen {
			t.Errorf("ops %q read as %q", ops[:min(len(ops), 20)], s.Ops)
		}
	}
	s := Read(testroot.Files(t, ext(map[string]string{"sys/kernel/sched_ext/root/ops": "evil\x1b[2J\n"})))
	if s.Ops != `evil\x1b[2J` {
		t.Errorf("Ops = %q, want the escape written out", s.Ops)
	}
}

func TestChanged(t *testing.T) {
	fair := State{Supported: true, State: StateDisabled, EnableSeq: 3}
	lavd := State{Supported: true, State: StateEnabled, Ops: "scx_lavd", SwitchAll: true, EnableSeq: 4}
	reloaded := lavd
	reloaded.EnableSeq = 5
	gone := fair
	gone.EnableSeq = 4
	none := State{EnableSeq: -1}
	cases := []struct {
		prev, cur State
		want      string
	}{
		{none, none, ""},
		{fair, fair, ""},
		{lavd, lavd, ""},
		{fair, lavd, "fair → ext:scx_lavd (enable_seq 3→4)"},
		{lavd, gone, "ext:scx_lavd → fair"},
		{lavd, reloaded, "ext:scx_lavd at both ends, but a sched_ext scheduler was loaded in between (enable_seq 4→5)"},
		{fair, gone, "fair at both ends, but a sched_ext scheduler was loaded in between (enable_seq 3→4)"},
		{fair, State{Supported: true, EnableSeq: -1, Problem: "state: unreadable"}, "fair → unknown"},
	}
	for _, tc := range cases {
		if got := Changed(tc.prev, tc.cur); got != tc.want {
			t.Errorf("Changed(%s, %s) = %q, want %q", tc.prev, tc.cur, got, tc.want)
		}
	}
}
