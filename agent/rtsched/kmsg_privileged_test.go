//go:build privileged

package rtsched

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"latencytier.io/latencytier/agent/host"
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
	if found, _ := kmsgHas("/dev/kmsg", line); found {
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

// Real kernel, the unprivileged pod's way: a host root with the host's
// procfs but no dev/kmsg (no device, CAP_SYSLOG) reads the log through
// syslog(2). Root cannot forge facility 0 through /dev/kmsg (the kernel
// files "<6>" as user.info, pri 14; checked here), so the test writes a
// "<6>" and a "<14>" line, finds both at pri 14 in the raw text and has
// kernelLogHas refuse them, and has it find a line the kernel logged
// itself, taken from the same syslog(2) text.
func TestSyslogReadsTheKernelLog(t *testing.T) {
	privtest.Root(t)
	dir := t.TempDir()
	if err := os.Symlink("/proc", filepath.Join(dir, "proc")); err != nil {
		t.Fatal(err)
	}
	root := host.New(dir)
	if _, err := kmsgHas(root.Path("dev", "kmsg"), throttleMsg); err == nil {
		t.Fatal("the test root has a dev/kmsg: the syslog(2) path is not taken")
	}
	tag := fmt.Sprintf("latencytier-test-%d", rand.Uint64())
	f, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		privtest.Missing(t, "writable /dev/kmsg: %v", err)
	}
	for _, pri := range []string{"<6>", "<14>"} {
		if _, err := f.WriteString(pri + tag + pri + "\n"); err != nil {
			f.Close()
			t.Fatal(err)
		}
	}
	f.Close()

	raw := rawSyslog(t)
	for _, pri := range []string{"<6>", "<14>"} {
		var got string
		for _, line := range strings.Split(raw, "\n") {
			if strings.HasSuffix(line, tag+pri) {
				got = line
			}
		}
		if !strings.HasPrefix(got, "<14>") {
			t.Errorf("the line written as %s reads back as %q, want it at pri 14 (user.info)", pri, got)
		}
		if kernelLogHas(root, tag+pri) {
			t.Errorf("kernelLogHas counted the user-space line written as %s as the kernel's", pri)
		}
	}
	var kernel string
	for _, line := range strings.Split(raw, "\n") {
		if text, ok := syslogLine([]byte(line)); ok && strings.TrimSpace(text) != "" {
			kernel = text
		}
	}
	if kernel == "" {
		privtest.Missing(t, "a record the kernel logged (facility 0) in this boot's log")
	}
	if !kernelLogHas(root, kernel) {
		t.Fatalf("kernelLogHas did not find the kernel's own line %q through syslog(2)", kernel)
	}
}

// rawSyslog is the whole kernel log as syslog(2) SYSLOG_ACTION_READ_ALL
// gives it, every record whatever its facility.
func rawSyslog(t *testing.T) string {
	size, err := unix.Klogctl(syslogActionSizeBuffer, nil)
	if err != nil {
		t.Fatalf("syslog(SIZE_BUFFER): %v", err)
	}
	buf := make([]byte, 2*size)
	n, err := unix.Klogctl(syslogActionReadAll, buf)
	if err != nil {
		t.Fatalf("syslog(READ_ALL): %v", err)
	}
	return string(buf[:n])
}
