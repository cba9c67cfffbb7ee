//go:build privileged

package tiersched_test

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/internal/tiertest"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/tiersched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Real kernel: this machine's kernel has no sched_ext. Asking the engine
// for the tier scheduler reports Unsupported with the kernel's reason, and
// nothing is loaded: no BPF map of the scheduler appears in the kernel and
// nothing is pinned. The test checks the real absence of sched_ext first,
// so it fails rather than pass on a kernel where it would prove nothing.
func TestTierIsUnsupportedWithoutSchedExt(t *testing.T) {
	root := testroot.RealKernel(t)
	if _, err := os.Stat("/sys/kernel/sched_ext"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("/sys/kernel/sched_ext: %v; this test asserts the refusal on a kernel without sched_ext", err)
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Fatalf("no kernel BTF here (%v): the refusal would be the BTF one, not sched_ext's", err)
	}
	before := tiertest.LoadedMaps(t)
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	rep, err := e.Apply(apply.Meta{Profile: "tier"}, []knob.Knob{tiersched.Knob(tiersched.Tier)})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rep.Results, func(r v1alpha1.SettingResult) bool { return r.Setting == tiersched.SettingID })
	if i < 0 {
		t.Fatalf("no %s result in %+v", tiersched.SettingID, rep.Results)
	}
	res := rep.Results[i]
	rel := strings.TrimSpace(testroot.Read(t, root.Proc("sys", "kernel", "osrelease")))
	want := "sched_ext is not built into this kernel (Linux " + rel + "; no /sys/kernel/sched_ext)"
	if res.State != v1alpha1.SettingUnsupported || !strings.Contains(res.Message, want) || res.Actual != tiersched.Fair {
		t.Errorf("result %+v, want Unsupported, actual fair, message containing %q", res, want)
	}
	if after := tiertest.LoadedMaps(t); after != before {
		t.Errorf("the tier scheduler's maps in the kernel went from %d to %d: something was loaded", before, after)
	}
	if _, err := os.Stat(tiersched.PinDir(root)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pin directory %s: %v, want none", tiersched.PinDir(root), err)
	}
	if v, err := tiersched.Read(root); err != nil || v != tiersched.Fair {
		t.Errorf("class after the refusal %q, %v; want fair", v, err)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatalf("revert: %v", err)
	}
}
