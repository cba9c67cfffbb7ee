package owners

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/cpumanager"
	lcpuset "latencytier.io/latencytier/agent/cpuset"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/internal/settingid"
)

// Placement is a container whose requested cpuset the runtime handed the
// agent's NRI plugin already set: by an NRI plugin ordered before it (a DRA
// CPU driver, a resource policy) or by kubelet.
type Placement struct {
	PodUID, Namespace, Pod string
	// ContainerID is the runtime's ID; Container its name.
	ContainerID, Container string
	// CPUs is the requested cpuset as the runtime gave it, or as the
	// plugin set it (ByAgent).
	CPUs string
	// ByAgent says the agent's plugin placed the container itself: its
	// cpuset is the agent's, whatever the profile's CPUs are now.
	ByAgent bool
}

// Input is what the pass knows besides the host.
type Input struct {
	// Pods are the node's pods: their containers' cpusets are read, their
	// CRI-O annotations looked at.
	Pods []podcgroup.Pod
	// Placements come from the agent's NRI plugin (nil without NRI mode).
	Placements []Placement
	// Isolated is the profile's isolated CPUs: a container of a pod
	// granted them (Pod.Isolated) on exactly these was placed by the agent
	// (its NRI plugin or a pass).
	Isolated cpuset.CPUSet
	// Ours reports whether the agent journaled path (it wrote it); nil:
	// none.
	Ours func(path string) bool
	// CPUManager is kubelet's CPU manager state as the pass read it; nil:
	// Detect reads it.
	CPUManager *cpumanager.State
	// Cgroups are options for finding the pods' cgroups (tests use a
	// unique kubepods name).
	Cgroups []podcgroup.Option
}

// Limits on what Detect reads: every file under /proc, /sys, /etc and /run
// is untrusted input.
const (
	maxProcs      = 1 << 16
	maxProcFile   = 4 << 10
	maxConfigFile = 256 << 10
	maxConfigs    = 64
	maxIncludes   = 8
)

// Detect reads the node's other writers once for a pass.
func Detect(root *host.Root, in Input) Set {
	s := Set{SysctlDir: root.Proc("sys")}
	procs, err := processes(root)
	if err != nil {
		s.Errs = append(s.Errs, err)
	}
	placers := placersOf(procs)
	s.Running = append(s.Running, placers...)
	if !s.kubelet(root, in) && (len(in.Pods) > 0 || len(in.Placements) > 0) {
		online, err := cpulist.Online(root)
		if err != nil {
			s.Errs = append(s.Errs, fmt.Errorf("online CPUs: %w", err))
		}
		s.placements(in, online, placers)
		s.cgroups(root, in, online, placers)
	}
	if pid, ok := find(procs, "crio"); ok {
		s.crio(root, in.Pods, pid)
	}
	if pid, ok := find(procs, "tuned"); ok {
		s.tuned(root, pid)
	}
	return s
}

// process is one entry of /proc, as far as Detect needs it.
type process struct {
	pid   int
	comm  string
	argv0 string // the basename of argv[0]
}

// processes lists the host's processes run by uid 0: a writer of cgroups,
// IRQs or sysctls runs as root, and a tenant's process named like one does
// not claim anything (it could only make the agent write less).
func processes(root *host.Root) ([]process, error) {
	entries, err := root.ReadDir(root.Proc())
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", root.Proc(), err)
	}
	var out []process
	for i, e := range entries {
		if i >= maxProcs {
			return out, fmt.Errorf("%s: more than %d entries; the rest not looked at", root.Proc(), maxProcs)
		}
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		p, ok := readProcess(root, pid)
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// readProcess reads pid when its comm names a writer Detect knows (one
// read for every other process) and it runs as root.
func readProcess(root *host.Root, pid int) (process, bool) {
	dir := root.Proc(strconv.Itoa(pid))
	comm, err := readBounded(filepath.Join(dir, "comm"), 64)
	if err != nil {
		return process{}, false // gone
	}
	p := process{pid: pid, comm: strings.TrimSpace(comm)}
	if !slices.ContainsFunc(writers, p.is) {
		return process{}, false
	}
	status, err := readBounded(filepath.Join(dir, "status"), maxProcFile)
	if err != nil || !rootUID(status) {
		return process{}, false // gone, or not root's
	}
	if cmd, err := readBounded(filepath.Join(dir, "cmdline"), maxProcFile); err == nil {
		arg, _, _ := strings.Cut(cmd, "\x00")
		p.argv0 = filepath.Base(arg)
	}
	return p, true
}

// rootUID reports whether a /proc/<pid>/status names real uid 0.
func rootUID(status string) bool {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(v)
			return len(f) > 0 && f[0] == "0"
		}
	}
	return false
}

// writers are the process names Detect looks for (nri-resource-policy-*
// shows as "nri-resource-po": the kernel cuts comm to 15 characters).
var writers = []string{"dra-driver-cpu", "nri-resource-po", "crio", "tuned"}

// is reports whether p runs name: its comm (cut to 15 characters by the
// kernel) or argv[0]'s basename.
func (p process) is(name string) bool {
	return p.argv0 == name || p.comm == name || (len(name) > 15 && p.comm == name[:15])
}

func find(procs []process, name string) (int, bool) {
	for _, p := range procs {
		if p.is(name) {
			return p.pid, true
		}
	}
	return 0, false
}

// Owners' advice: what to configure there instead.
const (
	draInstead  = "configure the DRA CPU driver (its DeviceClass and ResourceClaims) to keep these CPUs out of what it assigns, or move the profile's cpus.reserved and cpus.isolated off them"
	nriInstead  = "configure that resource policy (its balloon types, reserved and available CPUs, IRQ handling) instead, or move the profile's cpus.reserved and cpus.isolated off its CPUs"
	anyInstead  = "find the NRI plugin or process that sets container cpusets here (NRI plugins run in index order, before 90-latencytier) and configure it, or move the profile's cpus.reserved and cpus.isolated off these CPUs"
	kubeInstead = "configure kubelet: reservedSystemCPUs to the profile's cpus.reserved; a Guaranteed pod with integer CPUs gets exclusive CPUs"
)

// placersOf names the running processes that place containers on CPUs
// through NRI: DRA CPU drivers and nri-plugins' resource policies.
func placersOf(procs []process) []Owner {
	var out []Owner
	for _, p := range procs {
		switch {
		case p.is("dra-driver-cpu"):
			out = append(out, Owner{Kind: DRACPUDriver, Name: fmt.Sprintf("dra-driver-cpu (pid %d)", p.pid), Instead: draInstead})
		case p.comm == "nri-resource-po":
			name := p.argv0
			if !strings.HasPrefix(name, "nri-resource-policy-") {
				name = "nri-resource-policy"
			}
			out = append(out, Owner{Kind: NRIResourcePolicy, Name: fmt.Sprintf("%s (pid %d)", name, p.pid), Instead: nriInstead})
		}
	}
	return out
}

// placer names who placed a container when the cpuset is not the agent's
// and kubelet does not place containers: the one running placer, all of
// them when several, otherwise fallback.
func placer(placers []Owner, fallback string) Owner {
	switch len(placers) {
	case 0:
		return Owner{Kind: NRIPlugin, Name: fallback, Instead: anyInstead}
	case 1:
		return placers[0]
	}
	names := make([]string, len(placers))
	for i, p := range placers {
		names[i] = p.Name
	}
	return Owner{Kind: placers[0].Kind, Name: strings.Join(names, " or "), Instead: placers[0].Instead}
}

// kubelet records kubelet's CPU manager when it places containers itself
// (static): its exclusive CPUs are held, and containers' cpusets are
// kubelet's, so nothing else is attributed from them. It reports whether
// kubelet places containers.
func (s *Set) kubelet(root *host.Root, in Input) bool {
	st := in.CPUManager
	if st == nil {
		var err error
		if st, err = cpumanager.ReadFor(root, in.Pods); err != nil {
			s.Errs = append(s.Errs, fmt.Errorf("kubelet's CPU manager: %w", err))
			return false
		}
	}
	if !st.OwnsPlacement() {
		return false
	}
	o := Owner{Kind: KubeletCPUManager, Name: lcpuset.KubeletOwner(st), Instead: kubeInstead}
	s.Running = append(s.Running, o)
	s.Claims = append(s.Claims, Claim{Owner: o, Scopes: []string{strings.TrimSuffix(settingid.CPUSetPod.Prefix(), "/")},
		Why: "it places every container, " + st.Origin()})
	uids := make([]string, 0, len(st.Entries))
	for uid := range st.Entries {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	for _, uid := range uids {
		for name, cpus := range st.Entries[uid] {
			if !cpus.IsEmpty() {
				s.Holds = append(s.Holds, Hold{Owner: o, CPUs: cpus, Where: fmt.Sprintf("container %s of pod %s (exclusive CPUs)", name, uid)})
			}
		}
	}
	return true
}

// someoneElses parses a container's cpuset and reports whether another
// writer chose it: not empty, not every online CPU, not the profile's
// isolated set in a pod granted it (the agent's).
func someoneElses(list string, online cpuset.CPUSet, in Input, uid string) (cpuset.CPUSet, bool) {
	list = strings.TrimSpace(list)
	if list == "" {
		return cpuset.CPUSet{}, false
	}
	set, err := cpulist.Parse(list)
	if err != nil || set.IsEmpty() || set.Equals(online) || (granted(in.Pods, uid) && set.Equals(in.Isolated)) {
		return cpuset.CPUSet{}, false
	}
	return set, true
}

// granted reports whether pod uid is granted the isolated CPUs.
func granted(pods []podcgroup.Pod, uid string) bool {
	for _, p := range pods {
		if p.UID == uid {
			return p.Isolated
		}
	}
	return false
}

// placements holds the CPUs of containers the runtime handed the agent's
// NRI plugin placed already.
func (s *Set) placements(in Input, online cpuset.CPUSet, placers []Owner) {
	o := placer(placers, "an NRI plugin ordered before 90-latencytier")
	for _, p := range in.Placements {
		if p.ByAgent {
			continue
		}
		set, ok := someoneElses(p.CPUs, online, in, p.PodUID)
		if !ok {
			continue
		}
		s.Holds = append(s.Holds, Hold{Owner: o, CPUs: set, Where: fmt.Sprintf("container %s of pod %s/%s", p.Container, p.Namespace, p.Pod),
			Pod: settingid.Pod(settingid.CPUSetPod, p.Namespace, p.Pod, p.PodUID), Container: podcgroup.ShortID(p.ContainerID)})
	}
}

// cgroups holds the CPUs of the node's containers whose cpuset another
// writer set: found in the cgroup tree, neither journaled by the agent nor
// placed by its NRI plugin.
func (s *Set) cgroups(root *host.Root, in Input, online cpuset.CPUSet, placers []Owner) {
	var o *Owner
	byAgent := map[string]bool{}
	for _, p := range in.Placements {
		if p.ByAgent {
			byAgent[p.ContainerID] = true
		}
	}
	for _, p := range in.Pods {
		dirs, err := podcgroup.FindIn(root, "cpuset", p.UID, in.Cgroups...)
		if errors.Is(err, podcgroup.ErrNotFound) {
			continue
		}
		if err != nil {
			s.Errs = append(s.Errs, err)
			continue
		}
		for _, c := range dirs.Containers {
			path := filepath.Join(c, "cpuset.cpus")
			if (in.Ours != nil && in.Ours(path)) || byAgent[podcgroup.ContainerID(c)] {
				continue
			}
			list, err := readBounded(path, maxProcFile)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				s.Errs = append(s.Errs, err)
				continue
			}
			set, ok := someoneElses(list, online, in, p.UID)
			if !ok {
				continue
			}
			if o == nil {
				w := placer(placers, "another writer of container cpusets (kubelet's CPU manager policy is none)")
				o = &w
			}
			s.Holds = append(s.Holds, Hold{Owner: *o, CPUs: set, Path: path,
				Where: fmt.Sprintf("container %s of pod %s/%s", podcgroup.Key(c), p.Namespace, p.Name)})
		}
	}
}

// readBounded reads at most max bytes of path; a longer file is an error
// naming it.
func readBounded(path string, max int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return "", fmt.Errorf("%s: longer than %d bytes; not read", path, max)
	}
	return string(b), nil
}
