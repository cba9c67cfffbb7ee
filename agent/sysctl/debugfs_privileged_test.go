//go:build privileged

package sysctl

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/internal/kernellock"
	"latencytier.io/latencytier/internal/privtest"
)

// debugfsMounts counts the debugfs mounts at mountpoint.
func debugfsMounts(t *testing.T, mountpoint string) int {
	t.Helper()
	return len(slices.DeleteFunc(testroot.Mounts(t, "debugfs"), func(m string) bool { return m != mountpoint }))
}

// realDir resolves root's /sys/kernel/debug to the path mountinfo shows.
func realDir(t *testing.T, root *host.Root) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(root.Sys("kernel", "debug"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func unmountAll(t *testing.T, dir string) {
	t.Cleanup(func() {
		for syscall.Unmount(dir, syscall.MNT_DETACH) == nil {
		}
	})
}

// Real kernel: repeated Probes (one agent passing again, a restarted agent)
// mount debugfs once; a full revert's ReleaseDebugfs unmounts exactly that
// mount, and leaves one it did not make.
func TestProbeMountsDebugfsOnceAndReleaseUnmountsOnlyItsOwn(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	dir := realDir(t, root)
	before := debugfsMounts(t, dir)
	t.Cleanup(func() {
		for debugfsMounts(t, dir) > before && syscall.Unmount(dir, 0) == nil {
		}
	})
	for pass := 0; pass < 3; pass++ {
		r := root
		if pass == 2 {
			r = host.New(root.Dir()) // a restarted agent
		}
		if _, err := Probe(r, true); err != nil {
			t.Fatalf("Probe: %v", err)
		}
	}
	want := max(before, 1)
	if got := debugfsMounts(t, dir); got != want {
		t.Fatalf("%d debugfs mounts at %s after three Probes, want %d", got, dir, want)
	}
	unmounted, err := ReleaseDebugfs(host.New(root.Dir()))
	if err != nil {
		t.Fatal(err)
	}
	if unmounted != (before == 0) || debugfsMounts(t, dir) != before {
		t.Fatalf("ReleaseDebugfs unmounted=%v, %d mounts left, want %d", unmounted, debugfsMounts(t, dir), before)
	}
	if _, err := os.Stat(filepath.Join(root.StateDir(), debugfsMarker)); !os.IsNotExist(err) {
		t.Fatalf("mount record left: %v", err)
	}

	// Someone else's debugfs: never unmounted, even with a stale record
	// of an earlier boot.
	if before == 0 {
		if err := syscall.Mount("debugfs", dir, "debugfs", 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	testroot.Write(t, filepath.Join(root.StateDir(), debugfsMarker), "boot=earlier\nmntns=x\n")
	if l, err := Probe(root, true); err != nil || l.DebugfsMounted {
		t.Fatalf("Probe over someone else's debugfs = %+v, %v", l, err)
	}
	if unmounted, err := ReleaseDebugfs(root); err != nil || unmounted || debugfsMounts(t, dir) != max(before, 1) {
		t.Fatalf("ReleaseDebugfs of someone else's mount: unmounted=%v err=%v mounts=%d", unmounted, err, debugfsMounts(t, dir))
	}
}

// Up to 5.12 debugfs has no sched directory. Simulated on this kernel: a
// temp root whose sys/kernel/debug is a bind mount of a debugfs
// subdirectory (debugfs, but no sched in it). Probe must see debugfs is
// there and not mount again on every pass: that stacks a mount where the
// kernel allows it and fails with EBUSY (reported as "debugfs missing")
// where it does not, as here.
func TestProbeDoesNotStackDebugfsWithoutSchedDir(t *testing.T) {
	kernellock.Lock(t)
	privtest.Root(t)
	src := t.TempDir()
	if err := syscall.Mount("debugfs", src, "debugfs", 0, ""); err != nil {
		t.Fatalf("mount debugfs: %v", err)
	}
	unmountAll(t, src)
	var sub string
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		if e.IsDir() && e.Name() != "sched" {
			sub = filepath.Join(src, e.Name())
			break
		}
	}
	if sub == "" {
		privtest.Missing(t, "debugfs has no directory besides sched to stand for a 5.12 debugfs")
	}
	root := testroot.New(t, map[string]string{"sys/kernel/debug": "/", "proc/sys/kernel/osrelease": "5.10.0\n"})
	dir := root.Sys("kernel", "debug")
	if err := syscall.Mount(sub, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", sub, err)
	}
	unmountAll(t, dir)
	for pass := 0; pass < 3; pass++ {
		l, err := Probe(root, true)
		if err != nil || l.DebugfsMounted || l.DebugfsMissing {
			t.Fatalf("pass %d: Probe = %+v, %v; want debugfs found mounted", pass, l, err)
		}
	}
	if got := debugfsMounts(t, dir); got != 1 {
		t.Fatalf("%d debugfs mounts at %s after three Probes, want the one that was there", got, dir)
	}
}
