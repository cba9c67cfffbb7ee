package facts

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/internal/testroot"
)

func TestIsolation(t *testing.T) {
	cmd := "ro quiet isolcpus=managed_irq,domain,2-3 nohz_full=2-3 rcu_nocbs=2 -- isolcpus=9"
	got := Isolation(cmd)
	want := []string{"isolcpus=managed_irq,domain,2-3", "nohz_full=2-3", "rcu_nocbs=2"}
	if !slices.Equal(got, want) {
		t.Fatalf("Isolation = %v, want %v", got, want)
	}
	cases := []struct {
		isolated string
		missing  []string
	}{
		{"2", nil},
		{"2-3", []string{"rcu_nocbs=2-3"}},
		{"1", []string{"isolcpus=1", "nohz_full=1", "rcu_nocbs=1"}},
	}
	for _, tc := range cases {
		set, _ := cpuset.Parse(tc.isolated)
		if got := MissingIsolation(set, want); !slices.Equal(got, tc.missing) {
			t.Errorf("MissingIsolation(%s) = %v, want %v", tc.isolated, got, tc.missing)
		}
	}
	if got := MissingIsolation(cpuset.New(), nil); got != nil {
		t.Errorf("no isolated CPUs: %v", got)
	}
}

func TestReadFixture(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"proc/sys/kernel/osrelease":     "5.10.0-21-amd64",
		"proc/cmdline":                  "ro isolcpus=1",
		"sys/devices/system/cpu/online": "0-3",
		"sys/devices/system/cpu/cpu0/topology/thread_siblings_list": "0,2",
		"sys/devices/system/cpu/cpu2/topology/thread_siblings_list": "0,2",
		"sys/devices/system/cpu/cpu1/topology/thread_siblings_list": "1,3",
		"sys/devices/system/cpu/cpu3/topology/thread_siblings_list": "1,3",
		"sys/fs/cgroup/cgroup.controllers":                          "cpuset cpu",
		"sys/fs/cgroup/kubepods.slice/cgroup.procs":                 "",
	})
	f := Read(root, false, false)
	if f.Version != "5.10.0-21-amd64" || f.SchedulerClass != "CFS" || f.CgroupMode != "v2" || f.CgroupDriver != "systemd" ||
		f.OnlineCPUs != "0-3" || !slices.Equal(f.SMTSiblings, []string{"0,2", "1,3"}) || !slices.Equal(f.CmdlineIsolation, []string{"isolcpus=1"}) {
		t.Fatalf("facts = %+v", f)
	}
	if f.ActiveClass != "fair" || f.SchedExt == nil || f.SchedExt.Supported || !strings.Contains(f.SchedExt.Note, "not built into this kernel") {
		t.Errorf("a kernel without /sys/kernel/sched_ext: class %q, schedExt %+v; want fair, not built in", f.ActiveClass, f.SchedExt)
	}
}

// A node running someone's sched_ext scheduler reports it: class ext, the
// ops name, the sequence, partial mode.
func TestReadSchedExt(t *testing.T) {
	root := testroot.Files(t, map[string]string{
		"sys/kernel/sched_ext/state":      "enabled\n",
		"sys/kernel/sched_ext/switch_all": "0\n",
		"sys/kernel/sched_ext/enable_seq": "2\n",
		"sys/kernel/sched_ext/root/ops":   "scx_bpfland\n",
	})
	f := Read(root, true, false)
	x := f.SchedExt
	if f.ActiveClass != "ext" || x == nil || !x.Supported || x.State != "enabled" || x.Ops != "scx_bpfland" || !x.Partial ||
		x.EnableSeq == nil || *x.EnableSeq != 2 || x.Note != "" {
		t.Fatalf("class %q, schedExt %+v", f.ActiveClass, x)
	}
}
