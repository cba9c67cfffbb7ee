//go:build privileged

package vmtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	cgcpuset "latencytier.io/latencytier/agent/cpuset"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/systemd"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
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
	type slice struct{ prop, file, effective string }
	before := map[string]slice{}
	var knobs []knob.Knob
	for _, u := range systemd.Slices {
		p, err := systemd.Read(root, systemd.Path(u))
		if err != nil {
			t.Fatalf("read %s AllowedCPUs over %s: %v", u, root.Path("run", "systemd", "private"), err)
		}
		before[u] = slice{p, cpusetFile(u), cpusetFile(u, "effective")}
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
	rep, err := e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range systemd.Slices {
		// What systemd and the kernel keep after the lift is named in
		// the setting's result, not left for a human to find.
		msg := ""
		for _, r := range rep.Results {
			if r.Setting == systemd.Knob(u, cpus).ID {
				msg = r.Message
			}
		}
		if dropIn := "/run/systemd/system.control/" + u + ".d/50-AllowedCPUs.conf"; readOr(dropIn) != "<absent>" && !strings.Contains(msg, dropIn) {
			t.Errorf("%s: systemd kept %s (%q) and the revert result does not say so: %q", u, dropIn, readOr(dropIn), msg)
		}
		if cpusetFile(u) != "" && !strings.Contains(msg, "every online CPU") {
			t.Errorf("%s: cpuset.cpus kept at %q and the revert result does not say why: %q", u, cpusetFile(u), msg)
		}
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

// init.scope (PID 1) is confined through its own cpuset.cpus, not systemd.
// Its original is "" (the root's CPUs), which kernels before 7.0 refuse to
// write back while PID 1 is in it (ENOSPC): the revert used to fail five
// passes and give up, leaving PID 1 on the reserved CPUs (found by make
// test-node-stack on 6.12). Now it restores every online CPU, the same
// CPUs, and says so in the setting's result.
func TestCgroupV2RevertReleasesInitScope(t *testing.T) {
	root, _ := vm(t)
	if !cgroupV2() {
		t.Skip("cgroup v1: systemd does not manage cpusets, init.scope has no cpuset cgroup")
	}
	before := orig{cpusetFile("init.scope"), cpusetFile("init.scope", "effective")}
	if before.file == "<absent>" {
		t.Skip("init.scope has no cpuset.cpus (the root does not enable the cpuset controller)")
	}
	online, err := cpulist.Online(root)
	if err != nil {
		t.Fatal(err)
	}
	knobs, results, err := cgcpuset.Knobs(root, cpuset.New(0), cgcpuset.WithSlices("init.scope"))
	if err != nil || len(results) > 0 || len(knobs) != 1 {
		t.Fatalf("init.scope knobs: %v %+v %v", knobs, results, err)
	}
	e := engine(root)
	t.Cleanup(func() {
		_, _ = e.Revert()
		if cpusetFile("init.scope") == "0" { // never leave PID 1 confined
			_ = os.WriteFile("/sys/fs/cgroup/init.scope/cpuset.cpus", []byte(online.String()), 0o644)
		}
	})
	applyOne(t, e, knobs...)
	if got := cpusetFile("init.scope"); got != "0" {
		t.Fatalf("init.scope cpuset.cpus after apply = %q, want 0", got)
	}
	rep, err := e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	after := orig{cpusetFile("init.scope"), cpusetFile("init.scope", "effective")}
	t.Logf("init.scope before %+v, after revert %+v, populated %v; results %+v", before, after, populated("init.scope"), rep.Results)
	if after.effective != before.effective {
		t.Errorf("init.scope cpuset.cpus.effective after revert = %q, want the original %q", after.effective, before.effective)
	}
	if len(rep.Results) != 1 || rep.Results[0].State != v1alpha1.SettingReverted {
		t.Fatalf("revert results %+v, want init.scope Reverted", rep.Results)
	}
	switch msg := rep.Results[0].Message; {
	case after.file == before.file:
		// a kernel that empties a populated cgroup's cpuset.cpus (7.0+)
	case before.file == "" && after.file == online.String():
		if !strings.Contains(msg, "every online CPU") {
			t.Errorf("init.scope restored as %q, not %q, without saying why: %q", after.file, before.file, msg)
		}
	default:
		t.Errorf("init.scope cpuset.cpus after revert = %q, want the original %q (or every CPU, %s, where the kernel cannot empty it)", after.file, before.file, online)
	}
}

type orig struct{ file, effective string }

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
