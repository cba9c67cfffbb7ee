package systemd_test

import (
	"testing"
	"time"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/systemd"
)

// A PID 1 slow to read during authentication (systemd 252 under emulation
// in make test-kernels) gets the client's BEGIN and first call in one read;
// sd-bus then looks at the call only when the socket is readable again.
// The agent's handshake must not let the two travel together: every call
// is answered, not left until the call timeout closes the connection.
func TestCallsAnsweredBySlowAuthenticatingSystemd(t *testing.T) {
	root := testroot.New(t, map[string]string{"sys/devices/system/cpu/online": "0-1", "sys/fs/cgroup/system.slice/cpuset.cpus": ""})
	f := startFake(t, root, map[string][]byte{"system.slice": {}})
	f.slowAuth(50 * time.Millisecond)
	t.Cleanup(systemd.SetCallTimeout(5 * time.Second))

	path := systemd.Path("system.slice")
	for i, want := range []string{"", "1", "0"} {
		start := time.Now()
		if v, err := systemd.Read(root, path); err != nil || v != want {
			t.Fatalf("Read %d = %q, %v after %v; want %q", i, v, err, time.Since(start).Round(time.Millisecond), want)
		}
		if err := systemd.Write(root, path, []string{"1", "0", ""}[i]); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
}
