// Package privtest is for the tests that touch the real kernel (write
// /proc/sys or /proc/irq, make cgroups, mount, load eBPF). They live in
// files built only with the privileged tag (`go test -tags privileged`,
// which `make test` runs as root), so plain `go test ./...` as a normal user
// never touches the kernel. A run that asks for them must run them: a
// missing prerequisite fails the test instead of skipping it.
package privtest

import (
	"os"
	"testing"
)

// Root fails the test unless it runs as root.
func Root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("privileged test: needs root (run make test, or go test -tags privileged as root)")
	}
}

// Missing fails the test for a prerequisite this host lacks.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("privileged test: prerequisite missing: "+format, args...)
}
