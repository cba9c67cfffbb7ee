// Package kernellock serializes tests that change host-wide kernel state.
// `go test ./...` runs packages in parallel processes, so a mutex is not
// enough: Lock takes an exclusive flock on a host-wide file and releases it
// in t.Cleanup.
package kernellock

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// lockPath is the host-wide lock file.
const lockPath = "/run/latencytier-kernel-test.lock"

// Lock blocks until this test holds the host-wide kernel lock. Call it first
// in any test that writes /proc/sys, /proc/irq, or shared cgroups, so its
// own restore cleanups (registered after) run before the unlock.
func Lock(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("kernellock: %v", err)
	}
	start := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("kernellock: flock: %v", err)
	}
	if waited := time.Since(start); waited > time.Second {
		// Visible with -v: a slow test is often one waiting here for
		// another package, a benchmark or a demo holding the lock.
		t.Logf("kernellock: waited %s for %s", waited.Round(time.Millisecond), lockPath)
	}
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
