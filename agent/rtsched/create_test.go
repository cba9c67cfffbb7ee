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
