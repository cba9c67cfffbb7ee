package rtsched

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/printable"
	"latencytier.io/latencytier/internal/settingid"
)

// Bounds on what a pod's cgroups and /proc may make the agent read: the
// pod's owner controls how many processes and threads there are.
const (
	// maxThreads is how many threads of one pod get a knob; a pod with
	// more is tuned up to the bound (lowest tids first) and reported.
	maxThreads = 1024
	// maxNodeThreads is how many thread knobs all granted pods of a node
	// get together: each is a journal entry and a sched_setattr every
	// pass, and tenants decide how many pods and threads there are.
	// Threads beyond it are left as they are and reported.
	maxNodeThreads = 8192
	// maxIDFile bounds a cgroup.procs read (1024 pids of 7 digits fit).
	maxIDFile = 64 << 10
	// maxStat bounds a /proc/<tid>/stat read (comm is at most 64 bytes).
	maxStat = 4 << 10
)

// Grant is a pod the profile grants a real-time policy, with the value its
// threads get ("fifo:40").
type Grant struct {
	Pod   podcgroup.Pod
	Value string
	// CPUs are the profile's isolated CPUs: the pod keeps its grant only
	// while the cgroup cpuset of each of its containers lies within them
	// (cgroupcpus.go: what a thread cannot change), and every CPU each of
	// its threads may run on now (Cpus_allowed_list) is among them. A
	// real-time thread allowed on a shared CPU starves kubelet and the IRQ
	// threads there.
	CPUs cpuset.CPUSet
}

// Causes of a granted pod's refusal that the pod's owner controls: they are
// reported Refused (pod-scoped, an event on the pod), never Failed, so a
// tenant cannot mark the node PartiallyApplied or the profile Degraded.
const (
	// CauseCPUs: a container's cgroup cpuset, or a thread's affinity,
	// reaches a CPU outside cpus.isolated.
	CauseCPUs = "cpus.isolated"
	// CauseThreads: the pod has more threads than the agent tunes.
	CauseThreads = "threads"
	// CauseProcs: a container's cgroup.procs is larger than the agent reads.
	CauseProcs = "cgroup.procs"
	// CauseNodeThreads: the node's granted pods together have more threads
	// than the agent tunes (maxNodeThreads).
	CauseNodeThreads = "node threads"
)

// PodRefusal is a granted pod (or part of it) the agent declines for a
// cause the pod's owner controls.
type PodRefusal struct {
	Pod    podcgroup.Pod
	Cause  string
	Result v1alpha1.SettingResult
}

// PodID is the setting name of a pod's threads: "rtsched/<namespace>/<name>/
// <uid>"; each thread's knob adds "/<tid>@<start time>".
func PodID(p podcgroup.Pod) string {
	return settingid.Pod(settingid.RTSched, p.Namespace, p.Name, p.UID)
}

// Knobs returns one knob per thread of every process in the granted pods'
// container cgroups (the sandbox is not among them: only the IDs in the
// pod's status are), lowest tid first. A pod whose cgroup is missing or
// cannot be listed, a container whose cgroup the kernel refuses real-time
// tasks in and a container whose cpuset cgroup is missing or unreadable
// yield a Failed result (the node's doing; that container's threads get no
// knob); what the pod's owner controls yields a PodRefusal: a container
// whose cgroup cpuset is not within Grant.CPUs, a thread allowed outside
// them or a cgroup.procs beyond maxIDFile refuses the whole pod (no knob:
// threads set earlier are restored), a pod beyond maxThreads is tuned up to
// the bound. A thread that exits while being listed is skipped. The
// error is for a host where the agent cannot address the threads at all
// (another pid namespace).
func Knobs(root *host.Root, grants []Grant, opts ...podcgroup.Option) ([]knob.Knob, []v1alpha1.SettingResult, []PodRefusal, error) {
	if len(grants) == 0 {
		return nil, nil, nil, nil
	}
	if err := sameNamespace(root); err != nil {
		return nil, nil, nil, err
	}
	var knobs []knob.Knob
	var results []v1alpha1.SettingResult
	var refused []PodRefusal
	for _, g := range grants {
		k, r, no := podKnobs(root, g, opts)
		k, capped := nodeCap(len(knobs), maxNodeThreads, g, k)
		no = append(no, capped...)
		knobs = append(knobs, k...)
		results = append(results, r...)
		refused = append(refused, no...)
	}
	return knobs, results, refused, nil
}

// nodeCap keeps a pod's thread knobs within what is left of limit after
// have knobs of earlier pods, and refuses the rest with the numbers when it
// cuts: how many pods and threads there are is the tenants' doing, so the
// cut is the pod's (Refused, CauseNodeThreads), not a node failure.
func nodeCap(have, limit int, g Grant, k []knob.Knob) ([]knob.Knob, []PodRefusal) {
	room := max(limit-have, 0)
	if len(k) <= room {
		return k, nil
	}
	msg := fmt.Sprintf("pod %s/%s asked for real-time scheduling (%s), refused in part: the node's real-time grants reach the per-node bound of %d threads: %d of this pod's %d threads get %s, %d are left as they are",
		g.Pod.Namespace, g.Pod.Name, g.Value, limit, room, len(k), g.Value, len(k)-room)
	return k[:room], []PodRefusal{{Pod: g.Pod, Cause: CauseNodeThreads, Result: v1alpha1.SettingResult{Setting: PodID(g.Pod) + "/node-threads",
		Desired: g.Value, State: v1alpha1.SettingRefused, Message: msg}}}
}

func podKnobs(root *host.Root, g Grant, opts []podcgroup.Option) ([]knob.Knob, []v1alpha1.SettingResult, []PodRefusal) {
	id := PodID(g.Pod)
	fail := func(setting, format string, args ...any) []v1alpha1.SettingResult {
		return []v1alpha1.SettingResult{{Setting: setting, Desired: g.Value, State: v1alpha1.SettingFailed, Message: fmt.Sprintf(format, args...)}}
	}
	refuse := func(cause, format string, args ...any) []PodRefusal {
		msg := fmt.Sprintf("pod %s/%s asked for real-time scheduling (%s), refused: %s", g.Pod.Namespace, g.Pod.Name, g.Value, fmt.Sprintf(format, args...))
		return []PodRefusal{{Pod: g.Pod, Cause: cause, Result: v1alpha1.SettingResult{Setting: id, Desired: g.Value, State: v1alpha1.SettingRefused, Message: msg}}}
	}
	dirs, err := podcgroup.Find(root, g.Pod.UID, opts...)
	if err != nil {
		return nil, fail(id, "finding the pod's cgroup: %v", err), nil
	}
	ctrs := containers(dirs, g.Pod.ContainerIDs)
	cpusets, cpusetVersion, err := cpusetDirs(root, g.Pod.UID, dirs, ctrs, opts)
	if err != nil {
		return nil, fail(id, "finding the pod's cpuset cgroup (real-time is granted only where it lies within cpus.isolated): %v", err), nil
	}
	var tids []thr
	var results []v1alpha1.SettingResult
	skipped := 0
	for _, dir := range ctrs {
		if reason := rtRefused(root, dirs.Version, dir); reason != "" {
			results = append(results, fail(id+"/"+podcgroup.Key(dir), "%s", reason)...)
			continue
		}
		if cpusets[dir] == "" {
			results = append(results, fail(id+"/"+podcgroup.Key(dir), "container %s has no cgroup in the cpuset controller: nothing bounds where its threads run, so they get no real-time policy", podcgroup.Key(dir))...)
			continue
		}
		cpus, file, err := cgroupCPUs(root, cpusetVersion, cpusets[dir])
		if err != nil {
			results = append(results, fail(id+"/"+podcgroup.Key(dir), "reading the CPUs of container %s's cgroup: %v; its threads get no real-time policy", podcgroup.Key(dir), err)...)
			continue
		}
		if !cpusetWithin(cpus, g.CPUs) {
			return nil, results, refuse(CauseCPUs, "container %s's cgroup lets its threads run on CPUs %q (%s), not all within cpus.isolated %q: a thread may widen its own affinity to any CPU of its cgroup at any time, and a real-time thread on a shared CPU starves kubelet and the IRQ threads there; give the pod the isolated CPUs through its cgroup (cpus.namespaceSelector, or kubelet's static CPU manager); its threads keep (or get back) their own policy",
				podcgroup.Key(dir), cpus.String(), filepath.Base(file), g.CPUs.String())
		}
		ts, n, err := cgroupThreads(root, dir)
		if errors.Is(err, errTooLong) {
			return nil, results, refuse(CauseProcs, "container %s has more processes than the agent lists (%v); its threads keep (or get back) their own policy", podcgroup.Key(dir), err)
		}
		if err != nil {
			return nil, fail(id, "listing the threads of container %s: %v", podcgroup.Key(dir), err), nil
		}
		tids, skipped = append(tids, ts...), skipped+n
	}
	if out := outside(tids, g.CPUs); out != nil {
		return nil, results, refuse(CauseCPUs, "thread %d (%s) may run on CPUs %s, not all within cpus.isolated %q: a real-time thread on a shared CPU starves kubelet and the IRQ threads there; pin the pod to the isolated CPUs (cpus.namespaceSelector, kubelet's static CPU manager); its threads keep (or get back) their own policy",
			out.tid, out.comm, out.allowed, g.CPUs.String())
	}
	var no []PodRefusal
	if skipped > 0 {
		results = append(results, v1alpha1.SettingResult{Setting: id + "/unmanaged", Desired: g.Value, State: v1alpha1.SettingUnsupported,
			Message: fmt.Sprintf("%d threads use SCHED_DEADLINE or another policy the agent does not manage; left as they are", skipped)})
	}
	slices.SortFunc(tids, func(a, b thr) int { return a.tid - b.tid })
	if len(tids) > maxThreads {
		no = refuse(CauseThreads, "the pod has %d threads; only the first %d (lowest tids) get %s", len(tids), maxThreads, g.Value)
		no[0].Result.Setting = id + "/threads"
		tids = tids[:maxThreads]
	}
	knobs := make([]knob.Knob, 0, len(tids))
	for _, t := range tids {
		p := threadPath(t.tid, t.start)
		knobs = append(knobs, knob.Knob{ID: id + "/" + p[len(pathPrefix):], Path: p, Access: Access, Desired: g.Value,
			Label: fmt.Sprintf("thread %d (%s) of pod %s/%s", t.tid, t.comm, g.Pod.Namespace, g.Pod.Name)})
	}
	return knobs, results, no
}

// outside is the first thread (lowest tid) allowed on a CPU outside cpus,
// nil when every thread stays within it.
func outside(tids []thr, cpus cpuset.CPUSet) *thr {
	var first *thr
	for i := range tids {
		if !tids[i].allowed.IsSubsetOf(cpus) && (first == nil || tids[i].tid < first.tid) {
			first = &tids[i]
		}
	}
	return first
}

// containers are the container cgroups whose IDs the pod's status names.
func containers(dirs *podcgroup.Dirs, ids []string) []string {
	var out []string
	for _, dir := range dirs.Containers {
		short := podcgroup.ShortID(podcgroup.ContainerID(dir))
		if slices.ContainsFunc(ids, func(id string) bool { return podcgroup.ShortID(id) == short }) {
			out = append(out, dir)
		}
	}
	return out
}

// rtRefused says why the kernel would refuse real-time tasks in a cgroup v1
// cpu cgroup: with CONFIG_RT_GROUP_SCHED a task may only become real-time
// in a group with a real-time budget, and kubelet makes every pod cgroup
// with cpu.rt_runtime_us 0 (sched_setscheduler fails with EPERM).
func rtRefused(root *host.Root, version int, dir string) string {
	if version != 1 {
		return ""
	}
	v, err := root.ReadString(filepath.Join(dir, "cpu.rt_runtime_us"))
	if err != nil || v != "0" {
		return ""
	}
	return fmt.Sprintf("the kernel refuses real-time tasks in %s: its cpu.rt_runtime_us is 0 (CONFIG_RT_GROUP_SCHED on cgroup v1); give the pod's cgroups a real-time budget (cpu.rt_runtime_us, from kubepods down) or run the node on cgroup v2", dir)
}

// thr is one thread found in a cgroup.
type thr struct {
	tid   int
	start uint64
	comm  string
	// allowed are the CPUs it may run on (Cpus_allowed_list).
	allowed cpuset.CPUSet
}

// cgroupThreads lists every thread of every process in cgroup dir. A
// process or thread that exits meanwhile is skipped.
// Threads under a policy the agent does not manage (SCHED_DEADLINE,
// sched_ext) are left as they are and counted in skipped.
func cgroupThreads(root *host.Root, dir string) (out []thr, skipped int, err error) {
	pids, err := readIDs(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, 0, err
	}
	for _, pid := range pids {
		entries, err := root.ReadDir(root.Proc(strconv.Itoa(pid), "task"))
		if err != nil {
			continue // exited
		}
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || tid <= 0 {
				continue
			}
			st, err := readStat(root.Proc(strconv.Itoa(pid), "task", e.Name(), "stat"))
			if err != nil {
				continue // exited
			}
			if !managed(st.policy) {
				skipped++
				continue
			}
			if len(out) > 4*maxThreads {
				return out, skipped, nil // enough to know the pod is over the bound
			}
			allowed, err := allowedCPUs(root.Proc(strconv.Itoa(pid), "task", e.Name(), "status"))
			if err != nil {
				continue // exited
			}
			out = append(out, thr{tid: tid, start: st.start, comm: st.comm, allowed: allowed})
		}
	}
	return out, skipped, nil
}

// allowedCPUs reads a thread's Cpus_allowed_list: its affinity within its
// cpuset.
func allowedCPUs(path string) (cpuset.CPUSet, error) {
	b, err := readBounded(path, maxStat*4)
	if err != nil {
		return cpuset.New(), err
	}
	return cpulist.Parse(statusField(string(b), "Cpus_allowed_list"))
}

// managed reports whether stat's policy number is one Read and Write know.
func managed(policy int) bool {
	for _, p := range policies {
		if int(p) == policy {
			return true
		}
	}
	return false
}

// readIDs reads a cgroup.procs file: one positive decimal id a line, at
// most maxIDFile bytes; anything else is an error, not a guess.
func readIDs(path string) ([]int, error) {
	b, err := readBounded(path, maxIDFile)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, line := range strings.Fields(string(b)) {
		id, err := strconv.Atoi(line)
		if err != nil || id <= 0 || len(line) > 10 {
			return nil, fmt.Errorf("%s: %q is not a pid", path, line)
		}
		out = append(out, id)
	}
	return out, nil
}

// errTooLong is a file beyond the bound readBounded reads.
var errTooLong = errors.New("longer than the agent reads")

func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, kerr.Classify("read", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, kerr.Classify("read", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is %w (%d bytes)", path, errTooLong, max)
	}
	return b, nil
}

// stat holds the /proc/<tid>/stat fields rtsched uses.
type stat struct {
	comm   string
	flags  uint64
	cpu    int
	rtPrio int
	policy int
	start  uint64
}

// pfKthread is PF_KTHREAD in the task flags (stat field 9).
const pfKthread = 0x00200000

// readStat reads and parses a stat file; comm may hold spaces and ')'.
func readStat(path string) (stat, error) {
	b, err := readBounded(path, maxStat)
	if err != nil {
		return stat{}, err
	}
	line := strings.TrimSpace(string(b))
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return stat{}, fmt.Errorf("%s: malformed stat", path)
	}
	f := strings.Fields(line[end+1:])
	if len(f) < 39 { // f[0] is field 3 (state); field N is f[N-3]
		return stat{}, fmt.Errorf("%s: short stat line", path)
	}
	// comm is the tenant's choice: escaped before it reaches a label,
	// a finding or a log.
	s := stat{comm: printable.String(line[open+1 : end])}
	var errs [5]error
	s.flags, errs[0] = strconv.ParseUint(f[6], 10, 64)
	s.start, errs[1] = strconv.ParseUint(f[19], 10, 64)
	s.cpu, errs[2] = strconv.Atoi(f[36])
	s.rtPrio, errs[3] = strconv.Atoi(f[37])
	s.policy, errs[4] = strconv.Atoi(f[38])
	if err := errors.Join(errs[:]...); err != nil {
		return stat{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
