package podcgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"latencytier.io/latencytier/agent/host"
)

// Kubelet cgroup drivers.
const (
	DriverCgroupfs = "cgroupfs"
	DriverSystemd  = "systemd"
)

// DefaultKubepods is the name kubelet gives its top-level pod cgroup.
const DefaultKubepods = "kubepods"

// ErrNotFound means no pod cgroup exists for the UID under any layout.
var ErrNotFound = errors.New("pod cgroup not found")

// Dirs are one pod's cgroup directories in the cpu controller.
type Dirs struct {
	// Version is the cgroup version of the cpu controller: 1 or 2.
	Version int
	// Driver is the kubelet cgroup driver the layout shows: cgroupfs or systemd.
	Driver string
	// Pod is the pod-level directory (absolute, under the host root).
	Pod string
	// Containers are the container-level directories below Pod (absolute,
	// sorted), including the sandbox (pause) container when it has one.
	// CRI-O's conmon cgroups (crio-conmon-<id>) are not containers and are
	// left out: see isConmon.
	Containers []string
}

// Option changes how Find looks.
type Option func(*options)

type options struct {
	kubepods string
}

// WithKubepods sets the top-level pod cgroup name (default "kubepods"; the
// systemd driver's slices are derived from it: "<name>.slice",
// "<name>-burstable.slice", ...). Tests use a unique name so they never touch
// a real kubelet's tree.
func WithKubepods(name string) Option {
	return func(o *options) { o.kubepods = name }
}

// Mode probes the host's cgroup layout: version 2 when /sys/fs/cgroup is the
// unified hierarchy, version 1 otherwise; hybrid when a v1 layout also mounts
// an (often empty) v2 hierarchy at /sys/fs/cgroup/unified. Version 0 means no
// cgroup filesystem was found.
func Mode(root *host.Root) (version int, hybrid bool) {
	if root.Exists(root.Cgroup("cgroup.controllers")) {
		return 2, false
	}
	if !root.IsDir(root.Cgroup()) {
		return 0, false
	}
	return 1, root.Exists(root.Cgroup("unified", "cgroup.controllers"))
}

// ControllerDir returns the root directory of a controller's hierarchy
// ("cpu" or "cpuset") and its cgroup version. In v1 the cpu controller is
// mounted at cpu,cpuacct, cpuacct,cpu or cpu.
func ControllerDir(root *host.Root, controller string) (string, int, error) {
	v, _ := Mode(root)
	switch v {
	case 2:
		return root.Cgroup(), 2, nil
	case 1:
		for _, name := range v1Mounts(controller) {
			if d := root.Cgroup(name); root.IsDir(d) {
				return d, 1, nil
			}
		}
		return "", 1, fmt.Errorf("cgroup v1 %s controller is not mounted under %s", controller, root.Cgroup())
	}
	return "", 0, fmt.Errorf("no cgroup filesystem under %s", root.Cgroup())
}

func v1Mounts(controller string) []string {
	if controller == "cpu" {
		return []string{"cpu,cpuacct", "cpuacct,cpu", "cpu"}
	}
	return []string{controller}
}

// Find locates the pod cgroup of uid in the cpu controller, trying both
// kubelet drivers and every QoS class (Guaranteed pods sit directly under
// kubepods), and lists its container cgroups. It returns ErrNotFound
// (wrapped) when the pod has no cgroup.
func Find(root *host.Root, uid string, opts ...Option) (*Dirs, error) {
	return FindIn(root, "cpu", uid, opts...)
}

// FindIn is Find in another controller's hierarchy ("cpuset"); in cgroup v2
// every controller shares the unified tree and FindIn equals Find.
func FindIn(root *host.Root, controller, uid string, opts ...Option) (*Dirs, error) {
	o := options{kubepods: DefaultKubepods}
	for _, f := range opts {
		f(&o)
	}
	if uid == "" || strings.ContainsAny(uid, "/.") {
		return nil, fmt.Errorf("invalid pod uid %q", uid)
	}
	base, version, err := ControllerDir(root, controller)
	if err != nil {
		return nil, err
	}
	for _, c := range candidates(o.kubepods, uid) {
		dir := filepath.Join(base, c.rel)
		if !root.IsDir(dir) {
			continue
		}
		containers, err := containerDirs(root, dir)
		if err != nil {
			return nil, fmt.Errorf("listing containers of pod %s: %w", uid, err)
		}
		return &Dirs{Version: version, Driver: c.driver, Pod: dir, Containers: containers}, nil
	}
	return nil, fmt.Errorf("pod %s under %s (%s): %w", uid, base, o.kubepods, ErrNotFound)
}

type candidate struct {
	driver string
	rel    string
}

// candidates lists where kubelet puts a pod's cgroup, for both drivers and
// the three QoS classes.
func candidates(kubepods, uid string) []candidate {
	escaped := strings.ReplaceAll(uid, "-", "_")
	top := kubepods + ".slice"
	out := []candidate{
		{DriverCgroupfs, filepath.Join(kubepods, "pod"+uid)},
		{DriverSystemd, filepath.Join(top, kubepods+"-pod"+escaped+".slice")},
	}
	for _, qos := range []string{"burstable", "besteffort"} {
		out = append(out,
			candidate{DriverCgroupfs, filepath.Join(kubepods, qos, "pod"+uid)},
			candidate{DriverSystemd, filepath.Join(top,
				kubepods+"-"+qos+".slice",
				kubepods+"-"+qos+"-pod"+escaped+".slice")},
		)
	}
	return out
}

// containerDirs returns the absolute, sorted subdirectories of dir except
// CRI-O's conmon cgroups.
func containerDirs(root *host.Root, dir string) ([]string, error) {
	names, err := root.Subdirs(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if !isConmon(n) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	sort.Strings(out)
	return out, nil
}

// conmonPrefix starts the cgroup of CRI-O's conmon, the monitor process it
// runs beside every container: "crio-conmon-<id>.scope" (systemd driver) or
// "crio-conmon-<id>" (cgroupfs), a sibling of the container's "crio-<id>".
const conmonPrefix = "crio-conmon-"

// isConmon reports whether a cgroup directory (path or base name) is CRI-O's
// conmon cgroup. conmon is not a container: it carries none of the pod's CPU
// limits, it is not the workload, and it shares its container's ID, so it
// must neither be tuned as a container nor named like one.
func isConmon(dir string) bool {
	return strings.HasPrefix(filepath.Base(dir), conmonPrefix)
}

// Key names a container cgroup in setting IDs: its short container ID, or
// "conmon-<short ID>" for a conmon cgroup, so a container and its conmon
// never share a journal entry.
func Key(dir string) string {
	short := ShortID(ContainerID(dir))
	if isConmon(dir) {
		return "conmon-" + short
	}
	return short
}

// runtimePrefixes are the scope prefixes container runtimes use with the
// systemd driver.
var runtimePrefixes = []string{"cri-containerd-", conmonPrefix, "crio-", "docker-", "cri-o-"}

// ContainerID extracts the runtime ID from a container cgroup directory:
// "<id>" (cgroupfs) or "cri-containerd-<id>.scope" (systemd; also docker-,
// crio-). A conmon cgroup yields the ID of the container it monitors; use
// Key to name cgroups.
func ContainerID(dir string) string {
	name := strings.TrimSuffix(filepath.Base(dir), ".scope")
	for _, p := range runtimePrefixes {
		if strings.HasPrefix(name, p) {
			return strings.TrimPrefix(name, p)
		}
	}
	return name
}

// ShortID is the first 12 characters of a container ID, as docker and
// crictl print it. A "scheme://" prefix is dropped first.
func ShortID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// KubepodsName is the top-level pod cgroup name opts set (DefaultKubepods
// without WithKubepods).
func KubepodsName(opts ...Option) string {
	o := options{kubepods: DefaultKubepods}
	for _, f := range opts {
		f(&o)
	}
	return o.kubepods
}
