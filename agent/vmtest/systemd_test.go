//go:build privileged

package vmtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/systemd"
)

// The agent's first run against a real systemd: AllowedCPUs on
// system.slice and user.slice over the private socket, at runtime. On
// cgroup v2 systemd writes it to the slices' cpuset.cpus, keeps it across a
// daemon-reload, and Revert restores the exact property and the CPUs the
// slices run on (cpuset.cpus.effective). cpuset.cpus gets its original
// contents back too, except that the kernel refuses to empty it on a
// cgroup that holds processes (system.slice): there it holds every online
// CPU. On cgroup v1 systemd has no cpuset support: the test records what
// it does with the property and skips.
func TestSystemdConfinesSlicesAndRevertsExactly(t *testing.T) {
	root, _ := vm(t)
	if !systemd.Booted(root) {
		t.Fatal("systemd is not booted")
	}
	cpus := cpuset.New(0)
	online, err := cpulist.Online(root)
	if err != nil {
		t.Fatal(err)
	}
	type orig struct{ prop, file, effective string }
	before := map[string]orig{}
	var knobs []knob.Knob
	for _, u := range systemd.Slices {
		p, err := systemd.Read(root, systemd.Path(u))
		if err != nil {
			t.Fatalf("read %s AllowedCPUs over %s: %v", u, root.Path("run", "systemd", "private"), err)
		}
		before[u] = orig{p, cpusetFile(u), cpusetFile(u, "effective")}
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
		if got := cpusetFile(u, "effective"); got != before[u].effective {
			t.Errorf("%s cpuset.cpus.effective after revert = %q, want the original %q", u, got, before[u].effective)
		}
		t.Logf("%s after revert: AllowedCPUs %q, cpuset.cpus %q, cpuset.cpus.effective %q, populated %v (before: %+v)",
			u, p, cpusetFile(u), cpusetFile(u, "effective"), populated(u), before[u])
		refused := before[u].file == "" && populated(u) // the kernel keeps it non-empty
		if got := cpusetFile(u); got != before[u].file && (!refused || got != online.String()) {
			t.Errorf("%s cpuset.cpus after revert = %q, want the original %q (every CPU, %s, where the kernel cannot empty it: %v)",
				u, got, before[u].file, online, refused)
		}
	}
}

// cpusetFile is unit's cgroup v2 cpuset.cpus, or with a suffix
// cpuset.cpus.<suffix> ("<absent>" without the cpuset controller there).
func cpusetFile(unit string, suffix ...string) string {
	return readOr("/sys/fs/cgroup/" + unit + "/" + strings.Join(append([]string{"cpuset.cpus"}, suffix...), "."))
}

// populated reports whether unit's cgroup (or one below it) holds processes.
func populated(unit string) bool {
	return strings.Contains(readOr("/sys/fs/cgroup/"+unit+"/cgroup.events"), "populated 1")
}

func readOr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "<absent>"
	}
	return strings.TrimSpace(string(b))
}
