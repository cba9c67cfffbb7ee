//go:build privileged

package vmtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/systemd"
)

// TestHostToolThroughSystemd runs host tools the way the agent stages boot
// arguments (issue 26): a transient oneshot service started over systemd's
// private socket, waited for, its failure reported with the exit status,
// and the unit gone afterwards either way.
func TestHostToolThroughSystemd(t *testing.T) {
	root, _ := vm(t)
	if !systemd.Booted(root) {
		t.Fatal("systemd is not booted")
	}
	const out = "/run/latencytier-hosttool-test"
	t.Cleanup(func() { _ = os.Remove(out) })
	ctx := context.Background()
	unit := "latencytier-hosttool-test.service"
	if err := systemd.Run(ctx, root, unit, []string{"/bin/sh", "-c", "echo ran as $(id -u) in $(cat /proc/self/cgroup | tail -n1) > " + out}, time.Minute); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("the tool did not run: %v", err)
	}
	if !strings.HasPrefix(string(b), "ran as 0 in") || !strings.Contains(string(b), unit) {
		t.Errorf("the tool ran as %q, want root inside %s", b, unit)
	}
	gone(t, unit)

	err = systemd.Run(ctx, root, unit, []string{"/bin/sh", "-c", "exit 3"}, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "exit-code") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("failing tool: %v, want its result and exit status 3", err)
	}
	gone(t, unit)

	// The same name again right after a failure: the leftover is cleared.
	if err := systemd.Run(ctx, root, unit, []string{"/bin/true"}, time.Minute); err != nil {
		t.Errorf("after a failure: %v", err)
	}
	gone(t, unit)

	for _, bad := range [][]string{{"sh", "-c", "true"}, {}} {
		if err := systemd.Run(ctx, root, unit, bad, time.Minute); err == nil {
			t.Errorf("argv %q accepted", bad)
		}
	}
	if err := systemd.Run(ctx, root, "sshd.service", []string{"/bin/true"}, time.Minute); err == nil {
		t.Error("a unit name outside latencytier-*.service accepted")
	}
}

// gone checks that systemd no longer holds unit.
func gone(t *testing.T, unit string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := exec.Command("systemctl", "show", "-p", "LoadState", "-p", "ActiveState", unit).Output()
		s := strings.TrimSpace(string(b))
		if strings.Contains(s, "LoadState=not-found") || strings.Contains(s, "ActiveState=inactive") {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s still loaded after the run: %s", unit, s)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
