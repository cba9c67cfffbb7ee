package measure

import (
	"fmt"
	"strconv"

	"github.com/prometheus/procfs"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/host"
)

// CPU classes in status.
const (
	ClassNode     = "Node"
	ClassIsolated = "Isolated"
	ClassReserved = "Reserved"
)

// cpuClasses are the profile's isolated and reserved CPU sets (empty when
// unset or unparsable).
type cpuClasses struct {
	isolated, reserved cpuset.CPUSet
}

// procFS is the host root's /proc as prometheus/procfs reads it, so a
// temp-dir root stands in for the host's tasks in tests.
func procFS(root *host.Root) (procfs.FS, error) { return procfs.NewFS(root.Proc()) }

// Task is one thread of the host, /proc/<pid>/task/<tid>.
type Task struct {
	PID, TID int
	Proc     procfs.Proc // reads the thread's own stat, schedstat and status
}

// key names the task across windows.
func (t Task) key() string { return strconv.Itoa(t.PID) + "/" + strconv.Itoa(t.TID) }

// Tasks lists every thread of every process under the host root's /proc.
func Tasks(root *host.Root) []Task {
	fs, err := procFS(root)
	if err != nil {
		return nil
	}
	procs, _ := fs.AllProcs()
	var out []Task
	for _, p := range procs {
		threads, _ := fs.AllThreads(p.PID)
		for _, th := range threads {
			out = append(out, Task{PID: p.PID, TID: th.PID, Proc: th})
		}
	}
	return out
}

// nodePressure reads "some avg10" of /proc/pressure/cpu, formatted as the
// kernel prints it.
func nodePressure(root *host.Root) (string, error) {
	fs, err := procFS(root)
	if err != nil {
		return "", err
	}
	psi, err := fs.PSIStatsForResource("cpu")
	if err != nil {
		return "", err
	}
	if psi.Some == nil {
		return "", fmt.Errorf("no some line in %s", root.Proc("pressure", "cpu"))
	}
	return strconv.FormatFloat(psi.Some.Avg10, 'f', 2, 64), nil
}
