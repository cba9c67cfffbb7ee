//go:build privileged

package vmtest

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/schedext"
)

// extVM skips the test outside the sched_ext rows (*-ext-*: a kernel with
// sched_ext and BTF, hack/vm/test-kernels.sh) and returns the real root.
func extVM(t *testing.T) *host.Root {
	t.Helper()
	root, row := vm(t)
	if !strings.Contains(row, "-ext-") {
		t.Skipf("row %s: the sched_ext tests run in the -ext- rows", row)
	}
	return root
}

// On a kernel built with sched_ext and no BPF scheduler loaded, the
// reader says what the kernel's own files say: supported, state disabled,
// every normal task in the fair class, no ops name, enable_seq read (7.3
// has it), nothing it could not parse; and two reads agree.
func TestSchedExtReportsFairWithSchedExtBuiltIn(t *testing.T) {
	root := extVM(t)
	raw := func(elem ...string) string {
		return read(t, root, root.Sys(append([]string{"kernel", "sched_ext"}, elem...)...))
	}
	if v := raw("state"); v != "disabled" {
		t.Fatalf("the kernel's state is %q: this test needs no scheduler loaded", v)
	}
	if _, err := os.Stat(root.Sys("kernel", "sched_ext", "root")); !os.IsNotExist(err) {
		t.Fatalf("root/ exists with no scheduler loaded: %v", err)
	}
	seq, err := strconv.ParseInt(raw("enable_seq"), 10, 64)
	if err != nil {
		t.Fatalf("enable_seq: %v", err)
	}

	s := schedext.Read(root)
	if !s.Supported || s.State != schedext.StateDisabled || s.Class() != schedext.ClassFair || s.String() != "fair" ||
		s.Ops != "" || s.SwitchAll || s.Partial() || s.EnableSeq != seq || s.Problem != "" {
		t.Fatalf("Read = %#v (class %s, %s); want supported, disabled, fair, enable_seq %d", s, s.Class(), s, seq)
	}
	if c := schedext.Changed(s, schedext.Read(root)); c != "" {
		t.Errorf("the class changed between two reads with nothing loaded: %s", c)
	}
	t.Logf("sched_ext: %#v (switch_all %s, nr_rejected %s)", s, raw("switch_all"), raw("nr_rejected"))
}

// The node's facts (what the LatencyNode's status.kernel says) on the same
// kernel: activeClass fair, schedExt supported and disabled with the
// kernel's enable_seq, and schedExt.note empty (it is set only on a kernel
// without sched_ext or for a file the agent could not read).
func TestFactsReportSchedExtSupportedAndFair(t *testing.T) {
	root := extVM(t)
	s := schedext.Read(root)
	f := facts.Read(root, true, false)
	x := f.SchedExt
	if f.ActiveClass != schedext.ClassFair || x == nil || !x.Supported || x.State != schedext.StateDisabled ||
		x.Ops != "" || x.Partial || x.Note != "" || x.EnableSeq == nil || *x.EnableSeq != s.EnableSeq {
		t.Fatalf("facts: activeClass %q, schedExt %+v; want fair, supported, disabled, enableSeq %d, no note", f.ActiveClass, x, s.EnableSeq)
	}
}
