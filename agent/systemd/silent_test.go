package systemd_test

import (
	"io"
	"net"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/systemd"
)

// startSilent is a systemd that authenticates and then never answers, as
// real systemd 252 did for some calls in the kernel VMs (make test-kernels).
func startSilent(t *testing.T, root *host.Root) {
	t.Helper()
	listenPrivate(t, root, func(c net.Conn) {
		defer c.Close()
		if br, err := saslServer(c); err == nil {
			_, _ = io.Copy(io.Discard, br)
		}
	})
}

// A call systemd never answers fails the setting instead of stalling the
// agent's pass forever.
func TestUnansweredCallFails(t *testing.T) {
	root := host.New(t.TempDir())
	startSilent(t, root)
	t.Cleanup(systemd.SetCallTimeout(200 * time.Millisecond))

	for name, call := range map[string]func() error{
		"Read":  func() error { _, err := systemd.Read(root, systemd.Path("system.slice")); return err },
		"Write": func() error { return systemd.Write(root, systemd.Path("system.slice"), "0") },
	} {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: no error from a systemd that never answers", name)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still waiting for systemd after 30s with a 200ms call timeout", name)
		}
	}
}
