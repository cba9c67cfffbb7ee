package tiersched

import (
	"fmt"
	"strings"

	"latencytier.io/latencytier/agent/cgstat"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/podcgroup"
	tbpf "latencytier.io/latencytier/agent/tiersched/bpf"
)

// MaxGranted is the most cgroups the scheduler's granted set holds
// (granted_cgroups in tier.bpf.c).
const MaxGranted = 4096

// Granted says whether the scheduler runs pod p's threads first: the
// profile granted the pod a tuning (quota removal or the isolated CPUs),
// each by its own namespace grant, so a tenant cannot put itself in the
// tier by asking.
func Granted(p podcgroup.Pod) bool { return p.OptedIn || p.Isolated }

// CgroupIDs are the cpu-controller cgroup IDs (directory inodes) of the
// granted pods and their containers, at most MaxGranted; a pod without a
// cgroup right now is skipped (its tasks are not on this node).
func CgroupIDs(root *host.Root, pods []podcgroup.Pod, opts ...podcgroup.Option) ([]uint64, error) {
	var ids []uint64
	for _, p := range pods {
		if !Granted(p) {
			continue
		}
		dirs, err := podcgroup.Find(root, p.UID, opts...)
		if err != nil {
			continue
		}
		for _, dir := range append([]string{dirs.Pod}, dirs.Containers...) {
			ino, err := root.Inode(dir)
			if err != nil {
				continue
			}
			if len(ids) == MaxGranted {
				return ids, fmt.Errorf("more than %d granted pod and container cgroups; the rest run as everyone else", MaxGranted)
			}
			ids = append(ids, ino)
		}
	}
	return ids, nil
}

// SyncGranted makes the pinned scheduler's granted set exactly ids; with
// no scheduler pinned it does nothing.
func SyncGranted(root *host.Root, ids []uint64) error {
	dir := PinDir(root)
	if !tbpf.Pinned(dir) {
		return nil
	}
	m, err := tbpf.OpenMaps(dir)
	if err != nil {
		return err
	}
	defer m.Close()
	return m.SetGranted(ids, nil)
}

// maxQuotaPods is how many limited pods a refusal names.
const maxQuotaPods = 8

// QuotaRefusal refuses the scheduler while a pod keeps a CPU limit (a CFS
// quota the profile does not remove: removed says which it removes). Under
// sched_ext the kernel enforces cpu.max only if the BPF scheduler does,
// and this one does not (yet): loading it would silently lift every such
// limit. Nil when no pod is limited.
func QuotaRefusal(root *host.Root, pods []podcgroup.Pod, removed func(podcgroup.Pod) bool, opts ...podcgroup.Option) *Refused {
	var limited []string
	for _, p := range pods {
		if removed != nil && removed(p) {
			continue
		}
		dirs, err := podcgroup.Find(root, p.UID, opts...)
		if err != nil {
			continue
		}
		for _, dir := range append([]string{dirs.Pod}, dirs.Containers...) {
			if cgstat.HasLimit(root, dirs.Version, dir) {
				limited = append(limited, p.Namespace+"/"+p.Name)
				break
			}
		}
	}
	if len(limited) == 0 {
		return nil
	}
	named := limited
	more := ""
	if len(named) > maxQuotaPods {
		named, more = named[:maxQuotaPods], fmt.Sprintf(" and %d more", len(limited)-maxQuotaPods)
	}
	return &Refused{Class: kerr.Unsupported, Reason: fmt.Sprintf("pods with a CPU limit the profile does not remove run on this node (%s%s): under sched_ext only the BPF scheduler can enforce cpu.max, and the tier scheduler does not yet, so loading it would lift those limits; remove their quotas through the profile or leave scheduler.class unset",
		strings.Join(named, ", "), more)}
}
