//go:build privileged

package vmtest

import (
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/partition"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

const (
	partPodUID = "9a27d1e0-0000-4b1e-8f00-0123456789ab"
	partPodEsc = "9a27d1e0_0000_4b1e_8f00_0123456789ab"
	partCtrID  = "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"
)

// kubeletTree is a container cgroup shaped like kubelet's with the
// systemd driver and containerd (kubepods.slice/kubepods-burstable.slice/
// kubepods-burstable-pod<uid>.slice/cri-containerd-<id>.scope), made as
// plain cgroup directories under the root the way the quota test makes
// its pod (systemd leaves cgroups it did not create alone), with the
// cpuset controller enabled down to the container and cpuset.cpus on the
// container as kubelet's static CPU manager writes it. It returns the
// container's path relative to the cgroup root.
func kubeletTree(t *testing.T, cpus cpuset.CPUSet) string {
	t.Helper()
	enableCpuset(t, "/sys/fs/cgroup")
	rel := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + partPodEsc + ".slice/cri-containerd-" + partCtrID + ".scope"
	dir := "/sys/fs/cgroup"
	for _, e := range strings.Split(rel, "/") {
		dir = filepath.Join(dir, e)
		mkcpuset(t, dir)
	}
	write(t, dir+"/cpuset.cpus", cpus.String())
	return rel
}

func enableCpuset(t *testing.T, dir string) {
	t.Helper()
	f := filepath.Join(dir, "cgroup.subtree_control")
	if hasWord(readOr(f), "cpuset") {
		return
	}
	write(t, f, "+cpuset")
	t.Cleanup(func() { _ = os.WriteFile(f, []byte("-cpuset"), 0) })
}

// mkcpuset creates a cgroup (removed in cleanup, after its processes are
// gone) with the cpuset controller for its children unless it is a scope.
func mkcpuset(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Rmdir(dir) })
	if !strings.HasSuffix(dir, ".scope") {
		write(t, dir+"/cgroup.subtree_control", "+cpuset")
	}
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// busy starts n busy loops (sh), moves them into the cgroup dir, and
// starts each on CPU first: pinned there, then allowed the cgroup's CPUs
// again, which does not move a task already on an allowed CPU. They are
// killed in cleanup.
func busy(t *testing.T, dir string, n int, first int, allowed cpuset.CPUSet) []int {
	t.Helper()
	var pids []int
	for i := 0; i < n; i++ {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		write(t, dir+"/cgroup.procs", itoa(c.Process.Pid))
		pids = append(pids, c.Process.Pid)
	}
	var pin, wide unix.CPUSet
	pin.Set(first)
	for _, c := range allowed.List() {
		wide.Set(c)
	}
	for _, pid := range pids {
		if err := unix.SchedSetaffinity(pid, &pin); err != nil {
			t.Fatal(err)
		}
	}
	// Both must be running on first before the mask widens.
	for _, pid := range pids {
		for i := 0; onCPU(t, pid) != first; i++ {
			if i > 200 {
				t.Fatalf("pid %d never ran on CPU %d", pid, first)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, pid := range pids {
		if err := unix.SchedSetaffinity(pid, &wide); err != nil {
			t.Fatal(err)
		}
	}
	return pids
}

// onCPU is the CPU pid last ran on (/proc/<pid>/stat field 39).
func onCPU(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 on
	var cpu int
	if _, err := fmt.Sscan(f[39-3], &cpu); err != nil {
		t.Fatal(err)
	}
	return cpu
}

// migrations is pid's se.nr_migrations (/proc/<pid>/sched, a
// CONFIG_SCHED_DEBUG file), or -1 without it.
func migrations(t *testing.T, pid int) int {
	t.Helper()
	for _, line := range strings.Split(readOr(fmt.Sprintf("/proc/%d/sched", pid)), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "se.nr_migrations" {
			n := -1
			_, _ = fmt.Sscan(strings.TrimSpace(v), &n)
			return n
		}
	}
	t.Logf("no se.nr_migrations in /proc/%d/sched: migrations are judged from the CPU the tasks run on only", pid)
	return -1
}

// domainCPUs lists the CPUs that have at least one scheduler domain in
// /proc/schedstat (a "cpuN" line followed by "domainM <mask> ..." lines).
func domainCPUs(t *testing.T) cpuset.CPUSet {
	t.Helper()
	var out []int
	cpu := -1
	for _, line := range strings.Split(readOr("/proc/schedstat"), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && strings.HasPrefix(f[0], "cpu"):
			if _, err := fmt.Sscanf(f[0], "cpu%d", &cpu); err != nil {
				cpu = -1
			}
		case len(f) > 0 && strings.HasPrefix(f[0], "domain") && cpu >= 0:
			out = append(out, cpu)
		}
	}
	return cpuset.New(out...)
}

// hexMask parses a kernel cpumask ("f", "00000000,0000000f").
func hexMask(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	n, ok := new(big.Int).SetString(strings.ReplaceAll(strings.TrimSpace(s), ",", ""), 16)
	if !ok {
		t.Fatalf("cpumask %q does not parse", s)
	}
	var cpus []int
	for i := 0; i < n.BitLen(); i++ {
		if n.Bit(i) == 1 {
			cpus = append(cpus, i)
		}
	}
	return cpuset.New(cpus...)
}

// effectiveElsewhere lists every cgroup, but skip and its descendants,
// whose cpuset.cpus.effective intersects cpus.
func effectiveElsewhere(t *testing.T, cpus cpuset.CPUSet, skip string) []string {
	t.Helper()
	var bad []string
	_ = filepath.Walk("/sys/fs/cgroup", func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.IsDir() {
			return nil
		}
		if p == skip {
			return filepath.SkipDir
		}
		v := readOr(p + "/cpuset.cpus.effective")
		if v == "<absent>" {
			return nil
		}
		if eff, err := cpulist.Parse(v); err == nil && eff.Intersection(cpus).Size() > 0 {
			bad = append(bad, p+" ("+v+")")
		}
		return nil
	})
	return bad
}

// kernelView is what the kernel shows about CPU isolation; revert must
// restore it exactly.
type kernelView struct {
	isolated, workqueue string
	domains             string
	files               map[string]string
}

func view(t *testing.T, rel string) kernelView {
	t.Helper()
	v := kernelView{isolated: readOr("/sys/fs/cgroup/cpuset.cpus.isolated"), workqueue: readOr("/sys/devices/virtual/workqueue/cpumask"),
		domains: domainCPUs(t).String(), files: map[string]string{}}
	dir := "/sys/fs/cgroup"
	for _, e := range strings.Split(rel, "/") {
		dir = filepath.Join(dir, e)
		for _, f := range []string{"cpuset.cpus", partition.ExclusiveFile, partition.ExclusiveEffectiveFile, partition.PartitionFile, "cpuset.cpus.effective"} {
			v.files[dir+"/"+f] = readOr(dir + "/" + f)
		}
	}
	return v
}

func (v kernelView) diff(w kernelView) []string {
	var out []string
	if v.isolated != w.isolated || v.workqueue != w.workqueue || v.domains != w.domains {
		out = append(out, fmt.Sprintf("isolated %q→%q, workqueue cpumask %q→%q, CPUs with domains %q→%q", v.isolated, w.isolated, v.workqueue, w.workqueue, v.domains, w.domains))
	}
	for f, a := range v.files {
		if b := w.files[f]; a != b {
			out = append(out, fmt.Sprintf("%s %q→%q", f, a, b))
		}
	}
	return out
}

// partitionRow skips the rows whose kernel has no partitions below
// kubepods (6.1, cgroup v1: TestPartitionUnsupportedWritesNothing covers
// them) and the sched_ext row (2 vCPUs; its kernel has partitions, which
// the 6.12 rows test), and fails a 6.12 row with fewer than 4 CPUs.
func partitionRow(t *testing.T, root *host.Root, row string) {
	t.Helper()
	if strings.Contains(row, "-ext-") {
		t.Skipf("row %s: the partition tests run in the 6.12-cgroup2 row (4 vCPUs)", row)
	}
	if !strings.HasPrefix(row, "6.12") {
		t.Skipf("row %s: no cpuset.cpus.exclusive or no cgroup v2 (see TestPartitionUnsupportedWritesNothing)", row)
	}
	online, err := cpulist.Online(root)
	if err != nil {
		t.Fatal(err)
	}
	if online.Size() < 4 {
		t.Fatalf("online CPUs %s: the partition tests need 4 (2 housekeeping, 2 partitioned; hack/vm/test-kernels.sh gives the 6.12 row -smp 4)", online)
	}
}

func applyPartition(t *testing.T, root *host.Root, rel string, cpus cpuset.CPUSet, typ partition.Type) *apply.Engine {
	t.Helper()
	node := partition.Probe(root, partition.DefaultKubepods)
	if !node.Supported || !node.IsolatedList {
		t.Fatalf("Probe on %s: %+v, want supported with cpuset.cpus.isolated (6.8+)", read(t, root, root.Proc("sys", "kernel", "osrelease")), node)
	}
	e := engine(root)
	t.Cleanup(func() { _, _ = e.Revert() })
	applyPartitionWith(t, e, node, rel, cpus, typ)
	return e
}

// applyPartitionWith is one pass of e that wants only rel's partition: it
// fails the test unless every partition setting is applied, and returns
// the report (Restored: what the pass restored of earlier requests).
func applyPartitionWith(t *testing.T, e *apply.Engine, node partition.Capability, rel string, cpus cpuset.CPUSet, typ partition.Type) apply.Report {
	t.Helper()
	knobs, results := partition.Knobs(e.Root, node, []partition.Request{{Cgroup: rel, CPUs: cpus.String(), Type: string(typ)}}, partition.Options{Within: cpus})
	if len(results) != 0 {
		t.Fatalf("Knobs: %+v", results)
	}
	rep, err := e.Apply(apply.Meta{Profile: "vm"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range partition.Explain(rep.Results) {
		if r.State != v1alpha1.SettingApplied {
			t.Fatalf("%s: %s %q (%s)", r.Setting, r.State, r.Actual, r.Message)
		}
	}
	return rep
}

// An isolated partition on CPUs 2-3 of a kubelet-shaped container cgroup,
// from the kernel's own view: the container's partition reads isolated,
// its exclusive effective CPUs are 2-3, the root's cpuset.cpus.isolated
// lists them, no other cgroup's effective CPUs include them, they have no
// scheduler domain, unbound workqueues leave them; the partition survives
// a daemon-reload; revert restores every file and the domains.
func TestPartitionIsolatesCPUsOnTheKernel(t *testing.T) {
	root, row := vm(t)
	partitionRow(t, root, row)
	cpus := cpuset.New(2, 3)
	rel := kubeletTree(t, cpus)
	ctr := root.Cgroup(rel)
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	write(t, ctr+"/cgroup.procs", itoa(sleep.Process.Pid))
	before := view(t, rel)
	if !cpus.IsSubsetOf(domainCPUs(t)) {
		t.Fatalf("CPUs with scheduler domains before: %s, want %s among them", domainCPUs(t), cpus)
	}
	e := applyPartition(t, root, rel, cpus, partition.Isolated)
	check := func(when string) { t.Helper(); checkIsolated(t, when, ctr, cpus) }
	check("after apply")
	t.Logf("after apply: %+v", view(t, rel))
	hogNeverOn(t, cpus)
	if out, err := exec.Command("systemctl", "daemon-reload").CombinedOutput(); err != nil {
		t.Fatalf("daemon-reload: %v %s", err, out)
	}
	check("after daemon-reload")
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if d := before.diff(view(t, rel)); len(d) > 0 {
		t.Errorf("revert left:\n%s", strings.Join(d, "\n"))
	}
}

// checkIsolated asserts the kernel's view of an isolated partition at ctr
// holding cpus: its type, its exclusive effective CPUs, the root's
// isolated list, no other cgroup's effective CPUs, no scheduler domain on
// them, and unbound workqueues off them.
func checkIsolated(t *testing.T, when, ctr string, cpus cpuset.CPUSet) {
	t.Helper()
	if got := readOr(ctr + "/" + partition.PartitionFile); got != "isolated" {
		t.Errorf("%s: container partition %q, want isolated", when, got)
	}
	if got := readOr(ctr + "/" + partition.ExclusiveEffectiveFile); got != cpus.String() {
		t.Errorf("%s: container exclusive effective %q, want %s", when, got, cpus)
	}
	if got := readOr("/sys/fs/cgroup/" + partition.IsolatedFile); got != cpus.String() {
		t.Errorf("%s: root cpuset.cpus.isolated %q, want %s", when, got, cpus)
	}
	if bad := effectiveElsewhere(t, cpus, ctr); len(bad) > 0 {
		t.Errorf("%s: other cgroups still have %s: %s", when, cpus, strings.Join(bad, ", "))
	}
	if d := domainCPUs(t); d.Intersection(cpus).Size() > 0 {
		t.Errorf("%s: CPUs with scheduler domains %s, want none of %s", when, d, cpus)
	}
	wq := readOr("/sys/devices/virtual/workqueue/cpumask")
	if m := hexMask(t, wq); m.Intersection(cpus).Size() > 0 || m.IsEmpty() {
		t.Errorf("%s: unbound workqueue cpumask %s (%s), want it without %s", when, wq, m, cpus)
	}
}

// Two busy tasks started on one CPU of a two-CPU partition: in an isolated
// partition nothing balances them, so they share CPU 2 for 5 s without a
// migration while CPU 3 idles; in a root partition the scheduler spreads
// them over both CPUs.
func TestPartitionIsolatedDoesNotBalanceRootDoes(t *testing.T) {
	root, row := vm(t)
	partitionRow(t, root, row)
	cpus := cpuset.New(2, 3)
	for _, typ := range []partition.Type{partition.Isolated, partition.Root} {
		t.Run(string(typ), func(t *testing.T) {
			rel := kubeletTree(t, cpus)
			ctr := root.Cgroup(rel)
			applyPartition(t, root, rel, cpus, typ)
			pids := busy(t, ctr, 2, 2, cpus)
			m0 := []int{migrations(t, pids[0]), migrations(t, pids[1])}
			start := time.Now()
			spread := time.Duration(0)
			for time.Since(start) < 5*time.Second {
				a, b := onCPU(t, pids[0]), onCPU(t, pids[1])
				if a != b && spread == 0 {
					spread = time.Since(start)
					if typ == partition.Root {
						break
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
			moved := []int{migrations(t, pids[0]) - m0[0], migrations(t, pids[1]) - m0[1]}
			if m0[0] < 0 || m0[1] < 0 {
				moved = []int{0, 0}
			}
			t.Logf("%s partition: tasks on CPUs %d,%d; migrations %v; spread after %v", typ, onCPU(t, pids[0]), onCPU(t, pids[1]), moved, spread)
			switch typ {
			case partition.Isolated:
				if spread != 0 || moved[0] != 0 || moved[1] != 0 {
					t.Errorf("isolated partition balanced its tasks (spread after %v, migrations %v); want both on CPU 2 for 5 s", spread, moved)
				}
			case partition.Root:
				if spread == 0 || spread > time.Second {
					t.Errorf("root partition spread two busy tasks over CPUs %s after %v (0: not in 5 s), want within 1 s", cpus, spread)
				}
			}
		})
	}
}

// Rows without the interfaces (6.1: no cpuset.cpus.exclusive; cgroup v1)
// report the partition Unsupported with the reason and write nothing: the
// kubelet-shaped tree's files are unchanged and no journal appears.
func TestPartitionUnsupportedWritesNothing(t *testing.T) {
	root, row := vm(t)
	if !strings.HasPrefix(row, "6.1-") {
		t.Skipf("row %s: its kernel has partitions (6.7+)", row)
	}
	rel := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + partPodEsc + ".slice/cri-containerd-" + partCtrID + ".scope"
	var before kernelView
	if cgroupV2() {
		rel = kubeletTree(t, cpuset.New(1))
		before = view(t, rel)
	}
	node := partition.Probe(root, partition.DefaultKubepods)
	want := "6.7"
	if !cgroupV2() {
		want = "cgroup v1"
	}
	if node.Supported || !strings.Contains(node.Reason, want) {
		t.Fatalf("Probe on %s: %+v, want Unsupported naming %q", row, node, want)
	}
	t.Logf("%s: %s", row, node.Reason)
	knobs, results := partition.Knobs(root, node, []partition.Request{{Cgroup: rel, CPUs: "1", Type: "isolated"}}, partition.Options{Within: cpuset.New(1)})
	if len(knobs) != 0 || len(results) != 1 || results[0].State != v1alpha1.SettingUnsupported {
		t.Fatalf("Knobs: %+v %+v, want one Unsupported result and no knob", knobs, results)
	}
	_, err := os.Stat(journal.Path(root))
	hadJournal := err == nil
	rep, err := engine(root).Apply(apply.Meta{Profile: "vm"}, knobs)
	if err != nil || rep.Written != 0 {
		t.Fatalf("Apply: %+v %v, want no writes", rep, err)
	}
	if _, err := os.Stat(journal.Path(root)); err == nil && !hadJournal {
		t.Errorf("a journal appeared on %s", row)
	}
	if cgroupV2() {
		if d := before.diff(view(t, rel)); len(d) > 0 {
			t.Errorf("files changed on %s:\n%s", row, strings.Join(d, "\n"))
		}
	}
}

// TestMain doubles as an agent that crashes: with LT_VM_PARTITION_CGROUP
// set, the binary partitions that container cgroup's CPUs
// (LT_VM_PARTITION_CPUS, isolated) on the real kernel and SIGKILLs itself
// at the LT_VM_PARTITION_CRASH_AT-th write, as a node losing the agent pod
// mid-apply does.
func TestMain(m *testing.M) {
	rel := os.Getenv("LT_VM_PARTITION_CGROUP")
	if rel == "" {
		os.Exit(m.Run())
	}
	root := host.New("/")
	cpus, _ := cpulist.Parse(os.Getenv("LT_VM_PARTITION_CPUS"))
	at := 0
	_, _ = fmt.Sscan(os.Getenv("LT_VM_PARTITION_CRASH_AT"), &at)
	knobs, _ := partition.Knobs(root, partition.Probe(root, partition.DefaultKubepods),
		[]partition.Request{{Cgroup: rel, CPUs: cpus.String(), Type: string(partition.Isolated)}}, partition.Options{Within: cpus})
	seen := 0
	e := engine(root)
	e.Hook = func(s apply.Stage, _ string) {
		if s == apply.StageWritten {
			if seen++; seen == at {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
	}
	if _, err := e.Apply(apply.Meta{Profile: "vm"}, knobs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// An agent killed after each write of a partition's apply, on the real
// kernel: the revert that follows restores every file, the root's
// isolated list, the workqueue mask and the scheduler domains.
func TestPartitionCrashMidApplyThenRevert(t *testing.T) {
	root, row := vm(t)
	partitionRow(t, root, row)
	cpus := cpuset.New(2, 3)
	rel := kubeletTree(t, cpus)
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	write(t, root.Cgroup(rel)+"/cgroup.procs", itoa(sleep.Process.Pid))
	before := view(t, rel)
	e := engine(root)
	t.Cleanup(func() { _, _ = e.Revert() })
	const writes = 5 // kubepods, QoS, pod, container exclusive CPUs; the type
	for at := 1; at <= writes; at++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "LT_VM_PARTITION_CGROUP="+rel, "LT_VM_PARTITION_CPUS="+cpus.String(), "LT_VM_PARTITION_CRASH_AT="+itoa(at))
		out, err := cmd.CombinedOutput()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if err == nil || !ws.Signaled() {
			t.Fatalf("the agent was not killed at write %d: %v\n%s", at, err, out)
		}
		mid := view(t, rel)
		if _, err := e.Revert(); err != nil {
			t.Fatal(err)
		}
		if d := before.diff(view(t, rel)); len(d) > 0 {
			t.Errorf("crash at write %d (kernel then: isolated %q, partition %q), revert left:\n%s", at, mid.isolated,
				mid.files[root.Cgroup(rel)+"/"+partition.PartitionFile], strings.Join(d, "\n"))
		}
	}
}

// hogNeverOn runs a busy loop in a scope under system.slice for 2 s and
// fails if it is ever allowed or seen on cpus.
func hogNeverOn(t *testing.T, cpus cpuset.CPUSet) {
	t.Helper()
	dir := "/sys/fs/cgroup/system.slice/latencytier-vmtest-hog.scope"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hog := exec.Command("sh", "-c", "while :; do :; done")
	if err := hog.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hog.Process.Kill(); _ = hog.Wait(); _ = syscall.Rmdir(dir) }()
	write(t, dir+"/cgroup.procs", itoa(hog.Process.Pid))
	seen := map[int]bool{}
	for start := time.Now(); time.Since(start) < 2*time.Second; time.Sleep(10 * time.Millisecond) {
		seen[onCPU(t, hog.Process.Pid)] = true
	}
	var allowed string
	for _, line := range strings.Split(readOr(fmt.Sprintf("/proc/%d/status", hog.Process.Pid)), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			allowed = strings.TrimSpace(v)
		}
	}
	a, err := cpulist.Parse(allowed)
	if err != nil || a.Intersection(cpus).Size() > 0 {
		t.Errorf("a system.slice hog may run on %q (%v), want none of %s", allowed, err, cpus)
	}
	for c := range seen {
		if cpus.Contains(c) {
			t.Errorf("a system.slice hog ran on CPU %d of the partition %s (seen on %v)", c, cpus, seen)
		}
	}
	t.Logf("system.slice hog: allowed %s, seen on CPUs %v", allowed, seen)
}

// A partition the kernel invalidates after the agent made it: both its
// CPUs go offline (hotplug), the kernel reads "isolated invalid (No cpu
// available due to hotplug)", and the next pass reports it as drift with
// the kernel's state and re-asserts it (6.12 then holds it valid on the
// offline CPUs; a kernel that kept it invalid is reported Invalid with
// the reason); with the CPUs back a pass finds it applied, and revert
// restores everything.
func TestPartitionInvalidatedByHotplugIsReported(t *testing.T) {
	root, row := vm(t)
	partitionRow(t, root, row)
	cpus := cpuset.New(2, 3)
	rel := kubeletTree(t, cpus)
	ctr := root.Cgroup(rel)
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	write(t, ctr+"/cgroup.procs", itoa(sleep.Process.Pid))
	before := view(t, rel)
	e := applyPartition(t, root, rel, cpus, partition.Isolated)
	online := func(v string) {
		for _, c := range []int{3, 2} {
			write(t, fmt.Sprintf("/sys/devices/system/cpu/cpu%d/online", c), v)
		}
	}
	t.Cleanup(func() {
		for _, c := range []int{2, 3} {
			_ = os.WriteFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/online", c), []byte("1"), 0)
		}
	})
	knobs, _ := partition.Knobs(root, partition.Probe(root, partition.DefaultKubepods),
		[]partition.Request{{Cgroup: rel, CPUs: cpus.String(), Type: string(partition.Isolated)}}, partition.Options{Within: cpus})
	id := knobs[len(knobs)-1].ID
	online("0")
	st, err := partition.ParseState(readOr(ctr + "/" + partition.PartitionFile))
	if err != nil || !st.Invalid {
		t.Fatalf("with CPUs %s offline the partition reads %q (%v), want an invalid isolated partition", cpus, readOr(ctr+"/"+partition.PartitionFile), err)
	}
	t.Logf("kernel's reason with the CPUs offline: %q", st.Reason)
	rep, err := e.Apply(apply.Meta{Profile: "vm"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	var res v1alpha1.SettingResult
	for _, r := range partition.Explain(rep.Results) {
		if r.Setting == id {
			res = r
		}
	}
	drifted := false
	for _, d := range rep.Drifts {
		drifted = drifted || (d.ID == id && strings.Contains(d.Theirs, "invalid ("+st.Reason+")"))
	}
	if !drifted || st.Reason == "" {
		t.Errorf("pass with the CPUs offline: drifts %+v, want %s with the kernel's invalid state %q", rep.Drifts, id, st.Reason)
	}
	// The re-assertion either brings the partition back (6.12 does: an
	// exclusive effective set of offline CPUs is valid) or leaves it
	// invalid, reported Invalid with the reason.
	switch {
	case res.State == v1alpha1.SettingApplied && readOr(ctr+"/"+partition.PartitionFile) == "isolated":
	case res.State == v1alpha1.SettingInvalid && strings.Contains(res.Message, st.Reason):
	default:
		t.Errorf("pass with the CPUs offline: %+v, want Applied (re-asserted) or Invalid naming %q", res, st.Reason)
	}
	t.Logf("pass with the CPUs offline: %s %q %s", res.State, res.Actual, res.Message)
	online("1")
	t.Logf("after the CPUs came back the kernel reads %q", readOr(ctr+"/"+partition.PartitionFile))
	rep, err = e.Apply(apply.Meta{Profile: "vm"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range partition.Explain(rep.Results) {
		if r.State != v1alpha1.SettingApplied {
			t.Errorf("pass with the CPUs back: %s %s %q (%s)", r.Setting, r.State, r.Actual, r.Message)
		}
	}
	if got := readOr(ctr + "/" + partition.PartitionFile); got != "isolated" {
		t.Errorf("partition after the CPUs came back and a pass = %q, want isolated", got)
	}
	if got := readOr("/sys/fs/cgroup/" + partition.IsolatedFile); got != cpus.String() {
		t.Errorf("root cpuset.cpus.isolated = %q, want %s", got, cpus)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if d := before.diff(view(t, rel)); len(d) > 0 {
		t.Errorf("revert left:\n%s", strings.Join(d, "\n"))
	}
}
