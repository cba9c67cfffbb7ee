package rtsched

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/internal/testroot"
)

// statLine is a /proc/<tid>/stat line with the fields rtsched reads set.
func statLine(tid int, comm string, flags uint64, policy, prio int) string {
	f := make([]string, 50) // f[0] is field 3
	for i := range f {
		f[i] = "0"
	}
	f[0], f[6], f[19], f[37], f[38] = "S", fmt.Sprint(flags), "4242", fmt.Sprint(prio), fmt.Sprint(policy)
	return fmt.Sprintf("%d (%s) %s\n", tid, comm, strings.Join(f, " "))
}

func task(files map[string]string, pid, tid int, comm string, flags uint64, policy, prio int, allowed string) {
	dir := fmt.Sprintf("proc/%d/task/%d/", pid, tid)
	files[dir+"stat"] = statLine(tid, comm, flags, policy, prio)
	files[dir+"status"] = "Name:\t" + comm + "\nCpus_allowed_list:\t" + allowed + "\n"
}

func TestFindingsRTOnReservedAndThrottling(t *testing.T) {
	files := map[string]string{}
	task(files, 10, 10, "engine (main)", 0, 1, 90, "0-3") // FIFO, may run on reserved CPU 0
	task(files, 10, 11, "engine", 0, 0, 0, "0-3")         // SCHED_OTHER
	task(files, 20, 20, "pinned", 0, 2, 10, "2-3")        // RR, isolated CPUs only
	task(files, 2, 30, "migration/0", pfKthread, 1, 99, "0")
	files["sys/kernel/debug/sched/debug"] = "rt_rq[0]:/\n  .rt_nr_running : 1\n  .rt_throttled : 0\nrt_rq[1]:/kubepods\n  .rt_throttled : 1\n"
	files["dev/kmsg"] = "6,100,5,-;eth0: link up\n4,101,6,-;sched: RT throttling activated\n"
	root := testroot.New(t, files)

	fs := Findings(root, cpuset.New(0, 1))
	if len(fs) != 2 {
		t.Fatalf("findings %+v, want RT on reserved and RT throttled", fs)
	}
	on, thr := fs[0], fs[1]
	if on.Type != findingRTOnReserved || !strings.Contains(on.Message, "1 real-time tasks") || !strings.Contains(on.Message, "engine (main) (tid 10, prio 90") {
		t.Errorf("RT on reserved: %+v", on)
	}
	for _, not := range []string{"pinned", "migration"} {
		if strings.Contains(on.Message, not) {
			t.Errorf("RT on reserved names %s: %s", not, on.Message)
		}
	}
	if thr.Type != findingRTThrottled || !strings.Contains(thr.Message, throttleMsg) || !strings.Contains(thr.Message, "rt_rq[1]:/kubepods") ||
		strings.Contains(thr.Message, "rt_rq[0]") {
		t.Errorf("RT throttled: %+v", thr)
	}

	// Without reserved CPUs there is no housekeeping to protect; without
	// the log line and with no run queue throttled, nothing was cut.
	delete(files, "dev/kmsg")
	files["sys/kernel/debug/sched/debug"] = "rt_rq[0]:/\n  .rt_throttled : 0\n"
	if fs := Findings(testroot.New(t, files), cpuset.New()); len(fs) != 0 {
		t.Errorf("findings %+v, want none", fs)
	}
}
