//go:build privileged

package rtsched

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"latencytier.io/latencytier/internal/privtest"
)

// Real kernel: a line written to /dev/kmsg from user space (as root in any
// container may) is in the log, under facility user, and kmsgHas does not
// count it. The test writes a line of its own, not the throttling message,
// so no other reader of this boot's log takes it for throttling.
func TestKmsgUserLineIsNotKernel(t *testing.T) {
	privtest.Root(t)
	line := fmt.Sprintf("latencytier test: user-space kmsg line %d", time.Now().UnixNano())
	f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		privtest.Missing(t, "writable /dev/kmsg: %v", err)
	}
	// <0> asks for facility kernel, level emerg; the kernel files it under
	// user all the same.
	if _, err := f.WriteString("<0>" + line + "\n"); err != nil {
		f.Close()
		t.Fatal(err)
	}
	f.Close()
	if !rawKmsgHas(t, line) {
		t.Fatal("the line written to /dev/kmsg is not in the log")
	}
	if kmsgHas("/dev/kmsg", line) {
		t.Fatal("kmsgHas counted a user-space line as the kernel's")
	}
}

// rawKmsgHas looks for s in every record, whatever its facility.
func rawKmsgHas(t *testing.T, s string) bool {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 8192)
	for i := 0; i < maxKmsgRecs; i++ {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return false
		}
		if bytes.Contains(buf[:n], []byte(s)) {
			return true
		}
	}
	return false
}
