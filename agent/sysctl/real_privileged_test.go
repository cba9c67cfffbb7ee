//go:build privileged

package sysctl

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

// Real kernel (6.18, EEVDF): debugfs is mounted if needed, the sched knobs
// exist there but the kernel denies reading them (EPERM): they must come back
// Unsupported with the reason, and the /proc/sys knobs resolve normally.
func TestRealKernel(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	wasMounted := root.Exists(root.DebugSched())
	l, err := Probe(root, true)
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if l.DebugfsMounted {
		t.Cleanup(func() {
			if err := syscall.Unmount(root.Sys("kernel", "debug"), 0); err != nil {
				t.Errorf("unmount debugfs: %v", err)
			}
		})
	}
	if l.DebugfsMounted == wasMounted {
		t.Errorf("DebugfsMounted = %v with debugfs mounted before = %v", l.DebugfsMounted, wasMounted)
	}
	if !l.EEVDF {
		t.Fatal("this 6.18 kernel must probe as EEVDF")
	}
	knobs, results := Knobs(root, l, fullSpec(), nil, nil)
	ks, rs := byID(knobs), resultsByID(results)
	if ks[ID("autogroup")].Path != root.Proc("sys", "kernel", "sched_autogroup_enabled") {
		t.Errorf("autogroup knob = %+v", ks[ID("autogroup")])
	}
	if _, err := os.ReadFile(root.DebugSched("base_slice_ns")); err == nil {
		t.Skip("debugfs sched knobs are readable on this machine; the EPERM case does not apply")
	}
	for _, f := range []string{"baseSlice", "migrationCost"} {
		r := rs[ID(f)]
		if r.State != v1alpha1.SettingUnsupported || !strings.Contains(r.Message, "operation not permitted") {
			t.Errorf("%s = %+v, want Unsupported naming EPERM", f, r)
		}
	}
	if r := rs[ID("latency")]; r.State != v1alpha1.SettingUnsupported || !strings.Contains(r.Message, "EEVDF") {
		t.Errorf("latency = %+v", r)
	}
}
