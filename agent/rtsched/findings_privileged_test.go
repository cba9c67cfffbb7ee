//go:build privileged

package rtsched

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/internal/kernellock"
	"latencytier.io/latencytier/internal/privtest"
)

// The real /dev/kmsg ends in EAGAIN, not EOF: reading it must return, not
// wait for the next kernel message.
func TestKmsgReadReturnsAtTheEnd(t *testing.T) {
	privtest.Root(t)
	done := make(chan bool)
	go func() {
		found, err := kmsgHas("/dev/kmsg", "no such kernel message: latencytier test")
		if err != nil {
			t.Error(err)
		}
		done <- found
	}()
	select {
	case found := <-done:
		if found {
			t.Error("found a message that was never logged")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading /dev/kmsg did not return at the end of the log")
	}
}

// A real SCHED_FIFO process allowed on every CPU is found on the reserved
// ones; kernel threads (migration/N at FIFO 99) are not.
func TestRealRTTaskOnReservedIsFound(t *testing.T) {
	kernellock.Lock(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := unix.SchedSetAttr(cmd.Process.Pid, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0); err != nil {
		t.Fatal(err)
	}
	f := rtOnReserved(host.New("/"), cpuset.New(0))
	if f == nil || !strings.Contains(f.Message, fmt.Sprintf("sleep (tid %d, prio 1", cmd.Process.Pid)) {
		t.Fatalf("finding %+v does not name the FIFO sleep %d", f, cmd.Process.Pid)
	}
	if strings.Contains(f.Message, "migration/") {
		t.Errorf("finding names a kernel thread: %s", f.Message)
	}
}
