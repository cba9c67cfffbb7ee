// Package hostfixture holds the fixture host roots that both the measure
// and the window tests read (one copy of each, not one per package).
package hostfixture

import (
	"testing"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
)

// RTTasks is a temp-dir root holding one SCHED_FIFO task allowed on CPU 1
// (comm with spaces and parentheses, stat fields from a real 6.x kernel
// line) and one real-time kernel thread, which findings leave out.
func RTTasks(t *testing.T, runDelay, slices string) *host.Root {
	stat := "4242 (my (weird) app) S 1 4242 4242 0 -1 4194560 300 0 0 0 5 3 0 0 -51 0 1 0 12345 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 50 1 0 0 0 0 0 0 0 0 0 0 0\n"
	kthread := "7 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 0 0 0 -51 0 1 0 3 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 50 1 0 0 0 0 0 0 0 0 0 0 0\n"
	return testroot.Files(t, map[string]string{
		"proc/4242/task/4242/stat":      stat,
		"proc/4242/task/4242/status":    "Name:\tmy (weird) app\nCpus_allowed_list:\t1\n",
		"proc/4242/task/4242/schedstat": "100 " + runDelay + " " + slices + "\n",
		"proc/7/task/7/stat":            kthread,
		"proc/7/task/7/status":          "Name:\tksoftirqd/1\nCpus_allowed_list:\t1\n",
		"proc/7/task/7/schedstat":       "0 0 0\n",
		"proc/pressure/cpu":             "some avg10=1.50 avg60=0.20 avg300=0.00 total=123\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
	})
}

// ThrottledPodUID is the pod of ThrottledPodV2.
const ThrottledPodUID = "0b5e6f1c-0000-4000-8000-0123456789ab"

// ThrottledPodV2 is a cgroup v2 root (cpu.max, cpu.stat throttled_usec,
// cpu.pressure) with one pod, ThrottledPodUID, limited to half a CPU, 10 of
// 100 periods throttled and waiting for CPU (some avg10 23.5%), and one
// unlimited container; pod is the pod's cgroup relative to the root.
func ThrottledPodV2(t *testing.T) (root *host.Root, pod string) {
	pod = "sys/fs/cgroup/kubepods/pod" + ThrottledPodUID
	return testroot.Files(t, map[string]string{
		"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
		pod + "/cpu.max":                   "50000 100000\n",
		pod + "/cpu.stat":                  "usage_usec 1000\nnr_periods 100\nnr_throttled 10\nthrottled_usec 5000\n",
		pod + "/cpu.pressure":              "some avg10=23.50 avg60=4.00 avg300=1.00 total=123\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		pod + "/abc123/cpu.max":            "max 100000\n",
		pod + "/abc123/cpu.stat":           "usage_usec 900\n",
	}), pod
}
