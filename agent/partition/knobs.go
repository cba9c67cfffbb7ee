package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

// Request asks for one container's exclusive CPUs as a partition. Its
// fields come from kubelet and pod state and are not trusted: Knobs
// validates every one and reports a request it refuses as Invalid, naming
// the field.
type Request struct {
	// Cgroup is the container's cgroup, relative to the cgroup v2 root:
	// kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice/
	// cri-containerd-<id>.scope, or without the QoS slice (Guaranteed).
	Cgroup string
	// CPUs are the container's exclusive CPUs (kubelet's assignment), a
	// cpulist.
	CPUs string
	// Type is the partition type: "isolated" or "root".
	Type string
}

// ID is the setting name of the request's partition type:
// "partition/<pod cgroup>/<short container ID>".
func (r Request) ID() string {
	parts := strings.Split(r.Cgroup, "/")
	if len(parts) < 2 {
		return settingid.Partition.ID(r.Cgroup)
	}
	return settingid.Partition.ID(parts[len(parts)-2], podcgroup.Key(parts[len(parts)-1]))
}

// exclusive is the first element of an exclusive-CPUs partition ID.
const exclusive = "exclusive"

// ExclusiveID is the setting name of the exclusive CPUs of the cgroup rel
// (relative to the cgroup root): "partition/exclusive/<rel>", the container
// element shortened to its short ID so the name stays within the status
// bound.
func ExclusiveID(rel string, container bool) string {
	if container {
		rel = filepath.Join(filepath.Dir(rel), podcgroup.Key(filepath.Base(rel)))
	}
	return settingid.Partition.ID(exclusive, rel)
}

// Options bound what Knobs accepts.
type Options struct {
	// Kubepods is the top-level pod cgroup every request must lie in
	// (DefaultKubepods when empty).
	Kubepods string
	// Within are the CPUs a partition may take (the profile's isolated
	// CPUs); a request outside them is refused. Empty refuses all.
	Within cpuset.CPUSet
}

// Knobs turns requests into knobs: the exclusive CPUs of every cgroup on
// the way, shallowest first (each ancestor holds the union of the CPUs of
// the partitions below it), then each container's partition type. A
// request that is invalid (a path outside kubepods, a bad cpulist, CPUs
// outside Within or taken by an earlier request, an unknown type) gets a
// result and no knob; on a node without the interfaces (node) every request
// is Unsupported and there are no knobs at all.
func Knobs(root *host.Root, node Capability, reqs []Request, o Options) ([]knob.Knob, []v1alpha1.SettingResult) {
	if o.Kubepods == "" {
		o.Kubepods = DefaultKubepods
	}
	var results []v1alpha1.SettingResult
	if !node.Supported {
		for _, r := range reqs {
			results = append(results, v1alpha1.SettingResult{Setting: r.ID(), Desired: r.Type, State: v1alpha1.SettingUnsupported, Message: node.Reason})
		}
		return nil, results
	}
	var valid []checked
	taken := cpuset.New()
	for _, r := range reqs {
		c, err := check(root, r, o, taken)
		if err != nil {
			results = append(results, v1alpha1.SettingResult{Setting: r.ID(), Desired: r.Type, State: v1alpha1.SettingInvalid, Message: err.Error()})
			continue
		}
		taken = taken.Union(c.cpus)
		valid = append(valid, c)
	}
	return knobsFor(root, valid), results
}

// checked is a validated request.
type checked struct {
	req   Request
	elems []string // the cgroup path's elements, kubepods first
	cpus  cpuset.CPUSet
	typ   Type
}

// maxDepth is kubelet's deepest container cgroup below the root:
// kubepods / QoS / pod / container.
const maxDepth = 4

func check(root *host.Root, r Request, o Options, taken cpuset.CPUSet) (checked, error) {
	c := checked{req: r}
	elems, err := splitCgroup(r.Cgroup)
	if err != nil {
		return c, fmt.Errorf("cgroup %q: %w", r.Cgroup, err)
	}
	if elems[0] != o.Kubepods || len(elems) < 3 || len(elems) > maxDepth {
		return c, fmt.Errorf("cgroup %q: not a container cgroup of kubelet's %s (want %s/[<qos>/]<pod>/<container>)", r.Cgroup, o.Kubepods, o.Kubepods)
	}
	if err := realDirs(root, elems); err != nil {
		return c, fmt.Errorf("cgroup %q: %w", r.Cgroup, err)
	}
	c.elems = elems
	if c.cpus, err = cpulist.Parse(r.CPUs); err != nil {
		return c, fmt.Errorf("cpus %q of %s: %w", r.CPUs, r.Cgroup, err)
	}
	switch {
	case c.cpus.IsEmpty():
		return c, fmt.Errorf("cpus of %s: empty; a partition needs at least one CPU", r.Cgroup)
	case !c.cpus.IsSubsetOf(o.Within):
		return c, fmt.Errorf("cpus %s of %s: outside the isolated CPUs %q", c.cpus, r.Cgroup, o.Within.String())
	case c.cpus.Intersection(taken).Size() > 0:
		return c, fmt.Errorf("cpus %s of %s: %s already belong to another partition", c.cpus, r.Cgroup, c.cpus.Intersection(taken))
	}
	if c.typ, err = ParseType(r.Type); err != nil {
		return c, fmt.Errorf("type of %s: %w", r.Cgroup, err)
	}
	return c, nil
}

// splitCgroup splits a relative cgroup path and refuses anything that
// could name a file outside the cgroup it claims to be: absolute paths,
// "." and ".." elements, empty elements, and names with other than
// [A-Za-z0-9_.:@-].
func splitCgroup(p string) ([]string, error) {
	if p == "" || len(p) > 1024 {
		return nil, errors.New("empty or longer than 1024 bytes")
	}
	if strings.HasPrefix(p, "/") {
		return nil, errors.New("absolute; want a path relative to the cgroup root")
	}
	elems := strings.Split(p, "/")
	for _, e := range elems {
		if err := checkName(e); err != nil {
			return nil, err
		}
	}
	return elems, nil
}

func checkName(e string) error {
	if e == "" || e == "." || e == ".." {
		return fmt.Errorf("element %q is empty, \".\" or \"..\"", e)
	}
	if strings.Trim(e, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:@-") != "" {
		return fmt.Errorf("element %q has characters outside [A-Za-z0-9_.:@-]", e)
	}
	return nil
}

// realDirs checks that every element is a real directory under the cgroup
// root, not a symlink, so a knob's path stays in the cgroup it names.
func realDirs(root *host.Root, elems []string) error {
	dir := root.Cgroup()
	for _, e := range elems {
		dir = filepath.Join(dir, e)
		fi, err := os.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s does not exist", dir)
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir():
			return fmt.Errorf("%s is not a directory", dir)
		}
	}
	return nil
}

// knobsFor orders the knobs: exclusive CPUs by depth (every ancestor
// before its children, so the kernel's rule that a child's exclusive CPUs
// come from its parent's holds at every write), then the partition types.
// Revert walks this backwards: types back to member, then the exclusive
// CPUs removed deepest first.
func knobsFor(root *host.Root, reqs []checked) []knob.Knob {
	want := map[string]cpuset.CPUSet{} // rel → union of the CPUs below
	var rels []string
	for _, c := range reqs {
		for d := 1; d <= len(c.elems); d++ {
			rel := strings.Join(c.elems[:d], "/")
			if _, ok := want[rel]; !ok {
				rels = append(rels, rel)
			}
			want[rel] = want[rel].Union(c.cpus)
		}
	}
	slices.SortStableFunc(rels, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	containers := map[string]bool{}
	for _, c := range reqs {
		containers[c.req.Cgroup] = true
	}
	var knobs []knob.Knob
	for _, rel := range rels {
		knobs = append(knobs, exclusiveKnob(root, rel, containers[rel], want[rel]))
	}
	for _, c := range reqs {
		knobs = append(knobs, typeKnob(root, c))
	}
	return knobs
}

func exclusiveKnob(root *host.Root, rel string, container bool, cpus cpuset.CPUSet) knob.Knob {
	return knob.Knob{
		ID:      ExclusiveID(rel, container),
		Path:    root.Cgroup(rel, ExclusiveFile),
		Desired: cpus.String(),
		Equal:   cpulist.Equal,
		Restore: restoreCPUs,
	}
}

// restoreCPUs writes an empty cpuset.cpus.exclusive back as a newline: a
// zero-length write(2) need not reach the kernel's handler at all, and the
// kernel parses "\n" as the empty list.
func restoreCPUs(read string) string {
	if strings.TrimSpace(read) == "" {
		return "\n"
	}
	return read
}

func typeKnob(root *host.Root, c checked) knob.Knob {
	return knob.Knob{
		ID:      c.req.ID(),
		Path:    root.Cgroup(c.req.Cgroup, PartitionFile),
		Desired: string(c.typ),
		Label:   fmt.Sprintf("%s partition of %s on CPUs %s", c.typ, c.req.Cgroup, c.cpus),
		Restore: restoreType,
	}
}

// restoreType writes back the type a partition file read before the
// agent's first write: "member", or the type of a partition someone else
// made (an invalid one is written as its type; the kernel re-validates).
func restoreType(read string) string {
	if st, err := ParseState(read); err == nil {
		return string(st.Type)
	}
	return string(Member)
}

// IsTypeID reports whether a setting names a partition type (not the
// exclusive CPUs of a cgroup).
func IsTypeID(id string) bool {
	rest, ok := settingid.Partition.Rest(id)
	return ok && !strings.HasPrefix(rest, exclusive+"/")
}

// Explain rewrites the results of partition types whose read-back is an
// invalid partition ("isolated invalid (<reason>)") into Invalid results
// naming the kernel's reason, whether the write just made it so or the
// kernel invalidated it later (a sibling took the CPUs, hotplug) and the
// re-assertion did not bring it back.
func Explain(results []v1alpha1.SettingResult) []v1alpha1.SettingResult {
	for i, r := range results {
		if !IsTypeID(r.Setting) || r.State == v1alpha1.SettingApplied {
			continue
		}
		st, err := ParseState(r.Actual)
		if err != nil || !st.Invalid {
			continue
		}
		results[i].State = v1alpha1.SettingInvalid
		results[i].Message = fmt.Sprintf("%v (wrote %q; it behaves as a member: its CPUs are load-balanced with the rest)", st.Err(), r.Desired)
	}
	return results
}
