package rtsched

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/internal/testroot"
)

// The grant rule: a container's threads may be real-time only when the CPUs
// its cgroup cpuset allows (v2 cpuset.cpus.effective; v1
// cpuset.effective_cpus, else cpuset.cpus) lie within the isolated CPUs.
// The files are read bounded and parsed strictly; anything that is not a
// plain cpulist, an empty set or a missing file grants nothing.
func TestCgroupCpusetRule(t *testing.T) {
	isolated := cpuset.New(2, 3)
	cases := []struct {
		name    string
		version int
		files   map[string]string // under the container's cgroup
		grant   bool
		err     string // part of the error, "" when the read succeeds
	}{
		{"v2-within", 2, map[string]string{"cpuset.cpus.effective": "2-3\n"}, true, ""},
		{"v2-one-isolated-cpu", 2, map[string]string{"cpuset.cpus.effective": "3\n"}, true, ""},
		{"v2-wider", 2, map[string]string{"cpuset.cpus.effective": "1-3\n"}, false, ""},
		// cpuset.cpus "" means the parent's CPUs: only effective counts.
		{"v2-empty-cpus-wide-effective", 2, map[string]string{"cpuset.cpus": "\n", "cpuset.cpus.effective": "0-3\n"}, false, ""},
		{"v2-cpus-within-effective-not", 2, map[string]string{"cpuset.cpus": "2-3\n", "cpuset.cpus.effective": "0-3\n"}, false, ""},
		{"v2-no-cpuset-controller", 2, map[string]string{"cpu.max": "max 100000\n"}, false, "cpuset controller is not enabled"},
		{"v1-within", 1, map[string]string{"cpuset.cpus": "2-3\n", "cpuset.effective_cpus": "2-3\n"}, true, ""},
		{"v1-wider", 1, map[string]string{"cpuset.cpus": "0-3\n", "cpuset.effective_cpus": "0-3\n"}, false, ""},
		// cpuset_v2_mode: an effective set wider than cpuset.cpus.
		{"v1-effective-wider", 1, map[string]string{"cpuset.cpus": "2\n", "cpuset.effective_cpus": "0-3\n"}, false, ""},
		{"v1-no-effective-file", 1, map[string]string{"cpuset.cpus": "2\n"}, true, ""},
		{"v1-empty", 1, map[string]string{"cpuset.cpus": "\n", "cpuset.effective_cpus": "\n"}, false, ""},
		{"garbage", 2, map[string]string{"cpuset.cpus.effective": "2-3 ; 0\n"}, false, "not a CPU number"},
		{"negative", 2, map[string]string{"cpuset.cpus.effective": "-1\n"}, false, "not a CPU number"},
		{"huge-range", 2, map[string]string{"cpuset.cpus.effective": "0-5000000\n"}, false, "out of range"},
		{"oversized", 2, map[string]string{"cpuset.cpus.effective": strings.Repeat("2,", maxCpusetFile)}, false, "longer than the agent reads"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			for name, content := range tc.files {
				files["ctr/"+name] = content
			}
			root := testroot.New(t, files)
			cpus, _, err := cgroupCPUs(root, tc.version, root.Path("ctr"))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := err == nil && cpusetWithin(cpus, isolated); got != tc.grant {
				t.Errorf("granted %v (cgroup CPUs %s), want %v", got, cpus, tc.grant)
			}
		})
	}
}
