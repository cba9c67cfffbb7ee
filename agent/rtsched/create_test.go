package rtsched

import (
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
)

// CreateRefused: a container may be created real-time only where the
// kernel has no real-time group scheduling (no cpu.rt_runtime_us at the cpu
// hierarchy's root), and the hierarchy is known.
func TestCreateRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		refuse string // part of the refusal, "" for none
	}{
		{"v2", map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset cpu\n"}, ""},
		{"v1 without RT group scheduling", map[string]string{"sys/fs/cgroup/cpu,cpuacct/cpu.shares": "1024\n"}, ""},
		{"v1 with RT group scheduling", map[string]string{"sys/fs/cgroup/cpu,cpuacct/cpu.rt_runtime_us": "950000\n"}, "by group"},
		{"v2 with RT group scheduling", map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu\n", "sys/fs/cgroup/cpu.rt_runtime_us": "950000\n"}, "by group"},
		{"no cgroup filesystem", map[string]string{"proc/self/status": "Name: x\n"}, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CreateRefused(testroot.New(t, tc.files))
			if (tc.refuse == "") != (got == "") || !strings.Contains(got, tc.refuse) {
				t.Errorf("CreateRefused = %q, want one saying %q", got, tc.refuse)
			}
		})
	}
}

// A granted thread the agent first finds already at its grant was started
// so by the NRI plugin: its original is SCHED_OTHER, so revert and a
// withdrawn grant put it back there instead of keeping it real-time. Any
// other value read is the thread's own original.
func TestStartedGrantedOriginal(t *testing.T) {
	files := map[string]string{}
	task(files, 100, 100, "spin", 0, 0, 0, "1")
	_, knobsOf := tenantRootKnobs(t, files)
	ks, _, _ := knobsOf()
	if len(ks) != 1 {
		t.Fatalf("%d knobs, want 1", len(ks))
	}
	for read, want := range map[string]string{"fifo:40": StartedOriginal, "fifo:39": "fifo:39", "other:-5": "other:-5", "rr:40": "rr:40"} {
		if got := ks[0].RestoreValue(read); got != want {
			t.Errorf("original of a thread read at %s: %s, want %s", read, got, want)
		}
	}
}
