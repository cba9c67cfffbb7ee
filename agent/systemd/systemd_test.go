package systemd_test

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/sysctl"
	"latencytier.io/latencytier/agent/systemd"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func TestMask(t *testing.T) {
	for _, s := range []string{"", "0", "0-1", "3,8-9,63", "8191"} {
		set, _ := cpuset.Parse(s)
		got, err := systemd.FromMask(systemd.ToMask(set))
		if err != nil || !got.Equals(set) {
			t.Errorf("round trip of %q = %q, %v", s, got, err)
		}
	}
	if m := systemd.ToMask(cpuset.New(0, 9)); len(m) != 2 || m[0] != 1 || m[1] != 2 {
		t.Errorf("toMask(0,9) = %x; want 0102", m)
	}
	if _, err := systemd.FromMask(make([]byte, 2048)); err == nil {
		t.Error("fromMask accepted a mask beyond 8192 CPUs")
	}
}

func TestReadWriteOverTheBus(t *testing.T) {
	root := testroot.New(t, map[string]string{"sys/fs/cgroup/system.slice/cpuset.cpus": ""})
	f := startFake(t, root, map[string][]byte{"system.slice": {}})
	if !systemd.Booted(root) {
		t.Fatal("Booted = false with /run/systemd/system and the private socket")
	}
	path := systemd.Path("system.slice")
	if v, err := systemd.Read(root, path); err != nil || v != "" {
		t.Fatalf("Read = %q, %v; want \"\"", v, err)
	}
	if err := systemd.Write(root, path, "0-1"); err != nil {
		t.Fatal(err)
	}
	if v, err := systemd.Read(root, path); err != nil || v != "0-1" {
		t.Fatalf("Read after Write = %q, %v", v, err)
	}
	if calls := f.recorded(); len(calls) != 1 || calls[0] != "SetUnitProperties system.slice runtime=true AllowedCPUs=03" {
		t.Fatalf("calls = %q", calls)
	}
	if _, err := systemd.Read(root, systemd.Path("gone.slice")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read of an unknown unit: %v; want fs.ErrNotExist", err)
	}
	if systemd.Booted(testroot.New(t, nil)) {
		t.Fatal("Booted = true on a root without systemd")
	}
}

// TestConfinementSurvivesDaemonReload: on a cgroup v2 systemd host, the
// slices are confined through runtime AllowedCPUs too, so a daemon-reload
// (systemd rewriting cpuset.cpus from unit properties) keeps them on the
// reserved CPUs; revert restores each slice's original AllowedCPUs (empty
// for system.slice, 0-1 set by the admin for user.slice) and the files.
func TestConfinementSurvivesDaemonReload(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"sys/devices/system/cpu/online":          "0-1",
		"sys/fs/cgroup/cgroup.controllers":       "cpuset cpu",
		"sys/fs/cgroup/cgroup.subtree_control":   "cpuset cpu",
		"sys/fs/cgroup/system.slice/cpuset.cpus": "",
		"sys/fs/cgroup/user.slice/cpuset.cpus":   "0-1",
	})
	f := startFake(t, root, map[string][]byte{"system.slice": {}, "user.slice": {3}})
	reserved := "0"
	spec := v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Reserved: &reserved}}
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	pass := func() apply.Report {
		t.Helper()
		ds := desired.Render(root, sysctl.Layout{}, spec, nil, nil)
		rep, err := e.Apply(apply.Meta{Profile: "p"}, ds.Knobs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			if r.State != v1alpha1.SettingApplied {
				t.Fatalf("result %+v", r)
			}
		}
		return rep
	}
	slices := func() (string, string) {
		return testroot.Read(t, root.Cgroup("system.slice", "cpuset.cpus")), testroot.Read(t, root.Cgroup("user.slice", "cpuset.cpus"))
	}
	pass()
	f.reload()
	if s, u := slices(); s != "0" || u != "0" {
		t.Fatalf("after daemon-reload system.slice = %q, user.slice = %q; want both 0", s, u)
	}
	if rep := pass(); rep.Written != 0 || len(rep.Drifts) != 0 {
		t.Fatalf("pass after the reload wrote %d, drifts %+v; want nothing", rep.Written, rep.Drifts)
	}
	for _, c := range f.recorded() {
		if !strings.Contains(c, "runtime=true") {
			t.Errorf("persistent property change: %s", c)
		}
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	for unit, want := range map[string]string{"system.slice": "", "user.slice": "0-1"} {
		if v, err := systemd.Read(root, systemd.Path(unit)); err != nil || v != want {
			t.Errorf("%s AllowedCPUs after revert = %q, %v; want %q", unit, v, err, want)
		}
	}
	f.reload()
	if s, u := slices(); s != "" || u != "0-1" {
		t.Fatalf("after revert and a reload system.slice = %q, user.slice = %q; want \"\", 0-1", s, u)
	}
	if _, err := os.Stat(journal.Path(root)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("journal left after a full revert: %v", err)
	}
}

// The kernel refuses to empty the cpuset.cpus of a populated cgroup
// (system.slice on 6.1 and 6.12, seen in make test-kernels: systemd failed
// to set cpuset.cpus on /system.slice to the empty list with "No space left
// on device"). Lifting the slice's AllowedCPUs must still give it every CPU
// back, not leave it on the reserved ones; an empty slice gets "" again.
func TestLiftingConfinementOfPopulatedSliceFreesItsCPUs(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"sys/devices/system/cpu/online":          "0-3",
		"sys/fs/cgroup/system.slice/cpuset.cpus": "",
		"sys/fs/cgroup/user.slice/cpuset.cpus":   "",
	})
	f := startFake(t, root, map[string][]byte{"system.slice": {}, "user.slice": {}})
	f.populate("system.slice")
	for unit, want := range map[string]string{"system.slice": "0-3", "user.slice": ""} {
		if err := systemd.Write(root, systemd.Path(unit), "0"); err != nil {
			t.Fatal(err)
		}
		if err := systemd.Write(root, systemd.Path(unit), ""); err != nil {
			t.Fatal(err)
		}
		if v, err := systemd.Read(root, systemd.Path(unit)); err != nil || v != "" {
			t.Errorf("%s AllowedCPUs after lifting = %q, %v; want \"\"", unit, v, err)
		}
		if got := testroot.Read(t, root.Cgroup(unit, "cpuset.cpus")); got != want {
			t.Errorf("%s cpuset.cpus after lifting = %q, want %q", unit, got, want)
		}
	}
}
