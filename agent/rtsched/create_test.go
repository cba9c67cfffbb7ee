package rtsched

import (
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
)

// btfFile holds a few of a kernel BTF's strings, with and without the
// function only CONFIG_RT_GROUP_SCHED builds.
const (
	btfFile    = "sys/kernel/btf/vmlinux"
	btfWithout = "\x9f\xeb\x01\x00\x00sched_rt_period_timer\x00sched_group_rt_period\x00sched_setattr\x00"
	btfWith    = btfWithout + "sched_group_set_rt_runtime\x00tg_set_rt_bandwidth\x00"
)

// CreateRefused: a container may be created real-time only where the
// kernel has no real-time group scheduling (no cpu.rt_runtime_us at the cpu
// hierarchy's root), the hierarchy is known, and the agent shares the
// host's pid namespace (it journals and restores what it started).
func TestCreateRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		refuse string // part of the refusal, "" for none
	}{
		{"v2", map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset cpu\n", btfFile: btfWithout}, ""},
		// runc 1.5.3 on a kernel with CONFIG_RT_GROUP_SCHED: "error setting
		// scheduler: operation not permitted", and the container never
		// starts; on cgroup v2 no cgroup file shows that option.
		{"v2 on a kernel with RT group scheduling", map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset cpu\n", btfFile: btfWith}, "CONFIG_RT_GROUP_SCHED"},
		{"v2 without the kernel's BTF", map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset cpu\n"}, "unknown"},
		{"v1 without RT group scheduling", map[string]string{"sys/fs/cgroup/cpu,cpuacct/cpu.shares": "1024\n"}, ""},
		{"v1 with RT group scheduling", map[string]string{"sys/fs/cgroup/cpu,cpuacct/cpu.rt_runtime_us": "950000\n"}, "by group"},
		{"v2 with RT group scheduling", map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu\n", "sys/fs/cgroup/cpu.rt_runtime_us": "950000\n"}, "by group"},
		{"no cgroup filesystem", map[string]string{}, "unknown"},
		{"another pid namespace", map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset cpu\n", btfFile: btfWithout, "proc/self/status": "Name:\tagent\nNSpid:\t4242\t1\n"}, "pid namespace is not the host's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"proc/self/status": fmt.Sprintf("Name:\tagent\nNSpid:\t%d\n", os.Getpid())}
			maps.Copy(files, tc.files)
			got := CreateRefused(testroot.New(t, files))
			if (tc.refuse == "") != (got == "") || !strings.Contains(got, tc.refuse) {
				t.Errorf("CreateRefused = %q, want one saying %q", got, tc.refuse)
			}
		})
	}
}

// A granted thread the agent first finds already at its grant, with no
// journal entry, is someone else's: the thread itself, or another writer.
// Its original is what was read, and revert leaves it real-time. The
// threads the agent's NRI plugin started real-time are journaled by the
// plugin (Started), never guessed from their value.
func TestGrantedThreadFoundAtGrantIsItsOwn(t *testing.T) {
	files := map[string]string{}
	task(files, 100, 100, "spin", 0, 0, 0, "1")
	_, knobsOf := tenantRootKnobs(t, files)
	ks, _, _ := knobsOf()
	if len(ks) != 1 {
		t.Fatalf("%d knobs, want 1", len(ks))
	}
	for _, read := range []string{"fifo:40", "fifo:39", "other:-5", "rr:40"} {
		if got := ks[0].RestoreValue(read); got != read {
			t.Errorf("original of a thread read at %s: %s, want %s (its own)", read, got, read)
		}
	}
}
