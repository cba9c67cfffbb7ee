//go:build privileged

package vmtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/systemd"
)

// The agent's first run against a real systemd: AllowedCPUs on
// system.slice and user.slice over the private socket, at runtime. On
// cgroup v2 systemd writes it to the slices' cpuset.cpus, keeps it across a
// daemon-reload, and Revert restores the exact property and file contents.
// On cgroup v1 systemd has no cpuset support: the test records what it
// does with the property and skips.
func TestSystemdConfinesSlicesAndRevertsExactly(t *testing.T) {
	root, _ := vm(t)
	if !systemd.Booted(root) {
		t.Fatal("systemd is not booted")
	}
	cpus := cpuset.New(0)
	type orig struct{ prop, file string }
	before := map[string]orig{}
	var knobs []knob.Knob
	for _, u := range systemd.Slices {
		p, err := within(t, func() (string, error) { return systemd.Read(root, systemd.Path(u)) })
		if err != nil {
			t.Fatalf("read %s AllowedCPUs over %s: %v", u, root.Path("run", "systemd", "private"), err)
		}
		before[u] = orig{p, cpusetFile(u)}
		knobs = append(knobs, systemd.Knob(u, cpus))
	}
	e := engine(root)
	t.Cleanup(func() { _, _ = e.Revert() })
	applyOne(t, e, knobs...)
	for _, u := range systemd.Slices {
		if got, err := systemd.Read(root, systemd.Path(u)); err != nil || got != "0" {
			t.Errorf("%s AllowedCPUs after apply = %q (%v), want 0", u, got, err)
		}
	}
	if !cgroupV2() {
		t.Skipf("cgroup v1: systemd took AllowedCPUs=0 (D-Bus property set) but has no cpuset support here; cpuset.cpus of system.slice: %q",
			readOr("/sys/fs/cgroup/cpuset/system.slice/cpuset.cpus"))
	}
	for _, u := range systemd.Slices {
		if got := cpusetFile(u); got != "0" {
			t.Errorf("%s cpuset.cpus after apply = %q, want 0 (systemd wrote the confinement)", u, got)
		}
	}
	if out, err := exec.Command("systemctl", "daemon-reload").CombinedOutput(); err != nil {
		t.Fatalf("daemon-reload: %v %s", err, out)
	}
	for _, u := range systemd.Slices {
		if got := cpusetFile(u); got != "0" {
			t.Errorf("%s cpuset.cpus after daemon-reload = %q, want still 0", u, got)
		}
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	for _, u := range systemd.Slices {
		p, err := systemd.Read(root, systemd.Path(u))
		if err != nil || p != before[u].prop {
			t.Errorf("%s AllowedCPUs after revert = %q (%v), want the original %q", u, p, err, before[u].prop)
		}
		if got := cpusetFile(u); got != before[u].file {
			t.Errorf("%s cpuset.cpus after revert = %q, want the original %q", u, got, before[u].file)
		}
	}
}

// within runs a call to systemd with a deadline: a D-Bus call systemd
// never answers fails the test with what systemctl (same socket) says,
// instead of hanging the VM until its timeout.
func within(t *testing.T, f func() (string, error)) (string, error) {
	t.Helper()
	type res struct {
		v   string
		err error
	}
	ch := make(chan res, 1)
	go func() { v, err := f(); ch <- res{v, err} }()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(30 * time.Second):
		ctl, _ := exec.Command("timeout", "20", "systemctl", "show", "-p", "AllowedCPUs", "system.slice").CombinedOutput()
		bus, _ := exec.Command("timeout", "20", "busctl", "--address=unix:path=/run/systemd/private", "call",
			"org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "GetUnit", "s", "system.slice").CombinedOutput()
		t.Fatalf("systemd did not answer within 30s over /run/systemd/private; systemctl show: %q; busctl on the same socket: %q",
			strings.TrimSpace(string(ctl)), strings.TrimSpace(string(bus)))
		return "", nil
	}
}

// cpusetFile is unit's cgroup v2 cpuset.cpus ("<absent>" without the
// cpuset controller there).
func cpusetFile(unit string) string { return readOr("/sys/fs/cgroup/" + unit + "/cpuset.cpus") }

func readOr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "<absent>"
	}
	return strings.TrimSpace(string(b))
}
