//go:build privileged

package schedext

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
)

// Real kernel: this machine's kernel has no sched_ext (CONFIG_SCHED_CLASS_EXT
// unset), so the report is the fair class, with no scheduler named and no
// problem. The test checks the real absence of /sys/kernel/sched_ext first,
// so it fails rather than pass on a kernel where the report would have to
// say more (run it there as the ext VM row does).
func TestThisMachineRunsTheFairClass(t *testing.T) {
	root := testroot.RealKernel(t)
	if _, err := os.Stat("/sys/kernel/sched_ext"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("/sys/kernel/sched_ext: %v; this test asserts the report of a kernel without sched_ext", err)
	}
	if _, err := os.Stat("/sys/kernel/mm"); err != nil {
		t.Fatalf("/sys is not the kernel's sysfs here: %v", err)
	}
	s := Read(root)
	if s.Supported || s.Class() != ClassFair || s.String() != "fair" || s.Ops != "" || s.Problem != "" || s.EnableSeq != -1 {
		t.Fatalf("Read = %+v (class %s), want fair without sched_ext", s, s.Class())
	}
	if c := Changed(s, Read(root)); c != "" {
		t.Errorf("the class changed between two reads: %s", c)
	}
}
