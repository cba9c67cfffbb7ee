package podcgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/api/v1alpha1"
)

// mkfiles creates every rel path under dir: names ending in "/" are
// directories, others empty files.
func mkfiles(t *testing.T, dir string, rels ...string) {
	t.Helper()
	for _, r := range rels {
		p := filepath.Join(dir, r)
		if strings.HasSuffix(r, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	uid = "1b4f0c5e-9d7a-4b1e-8f00-0123456789ab"
	cid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	sid = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

func TestMode(t *testing.T) {
	tests := []struct {
		name    string
		files   []string
		version int
		hybrid  bool
	}{
		{"unified", []string{"sys/fs/cgroup/cgroup.controllers"}, 2, false},
		{"hybrid", []string{"sys/fs/cgroup/cpu/", "sys/fs/cgroup/unified/cgroup.controllers"}, 1, true},
		{"legacy", []string{"sys/fs/cgroup/cpu,cpuacct/"}, 1, false},
		{"none", []string{"proc/"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mkfiles(t, dir, tt.files...)
			v, h := Mode(host.New(dir))
			if v != tt.version || h != tt.hybrid {
				t.Fatalf("Mode = %d,%v; want %d,%v", v, h, tt.version, tt.hybrid)
			}
		})
	}
}

// TestModeRealHost checks Mode against the kernel's own mount table.
func TestModeRealHost(t *testing.T) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Skip(err)
	}
	want, wantHybrid := 1, false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[2] != "cgroup2" {
			continue
		}
		switch f[1] {
		case "/sys/fs/cgroup":
			want = 2
		case "/sys/fs/cgroup/unified":
			wantHybrid = true
		}
	}
	if want == 2 {
		wantHybrid = false
	}
	v, h := Mode(host.New("/"))
	if v != want || h != wantHybrid {
		t.Fatalf("Mode(/) = %d,%v; /proc/self/mounts says %d,%v", v, h, want, wantHybrid)
	}
	t.Logf("host cgroup mode: v%d hybrid=%v", v, h)
}

func TestFind(t *testing.T) {
	esc := strings.ReplaceAll(uid, "-", "_")
	tests := []struct {
		name      string
		files     []string
		kubepods  string
		version   int
		driver    string
		pod       string // relative to the host root
		container []string
	}{
		{
			name:      "cgroupfs v1 burstable",
			files:     []string{"sys/fs/cgroup/cpu,cpuacct/kubepods/burstable/pod" + uid + "/" + cid + "/", "sys/fs/cgroup/cpu,cpuacct/kubepods/burstable/pod" + uid + "/" + sid + "/"},
			version:   1,
			driver:    DriverCgroupfs,
			pod:       "sys/fs/cgroup/cpu,cpuacct/kubepods/burstable/pod" + uid,
			container: []string{cid, sid},
		},
		{
			name:      "cgroupfs v1 guaranteed under plain cpu mount",
			files:     []string{"sys/fs/cgroup/cpu/kubepods/pod" + uid + "/" + cid + "/", "sys/fs/cgroup/cpu/kubepods/pod" + uid + "/cpu.cfs_quota_us"},
			version:   1,
			driver:    DriverCgroupfs,
			pod:       "sys/fs/cgroup/cpu/kubepods/pod" + uid,
			container: []string{cid},
		},
		{
			name: "systemd v1 burstable",
			files: []string{
				"sys/fs/cgroup/cpu,cpuacct/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc + ".slice/cri-containerd-" + cid + ".scope/",
			},
			version:   1,
			driver:    DriverSystemd,
			pod:       "sys/fs/cgroup/cpu,cpuacct/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc + ".slice",
			container: []string{"cri-containerd-" + cid + ".scope"},
		},
		{
			name: "systemd v2 guaranteed",
			files: []string{
				"sys/fs/cgroup/cgroup.controllers",
				"sys/fs/cgroup/kubepods.slice/kubepods-pod" + esc + ".slice/crio-" + cid + ".scope/",
			},
			version:   2,
			driver:    DriverSystemd,
			pod:       "sys/fs/cgroup/kubepods.slice/kubepods-pod" + esc + ".slice",
			container: []string{"crio-" + cid + ".scope"},
		},
		{
			name: "systemd v2 besteffort docker",
			files: []string{
				"sys/fs/cgroup/cgroup.controllers",
				"sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + esc + ".slice/docker-" + cid + ".scope/",
			},
			version:   2,
			driver:    DriverSystemd,
			pod:       "sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + esc + ".slice",
			container: []string{"docker-" + cid + ".scope"},
		},
		{
			name:      "cgroupfs v2 custom kubepods name",
			files:     []string{"sys/fs/cgroup/cgroup.controllers", "sys/fs/cgroup/kubepods/burstable/pod" + uid + "/", "sys/fs/cgroup/lt-test/burstable/pod" + uid + "/" + cid + "/"},
			kubepods:  "lt-test",
			version:   2,
			driver:    DriverCgroupfs,
			pod:       "sys/fs/cgroup/lt-test/burstable/pod" + uid,
			container: []string{cid},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mkfiles(t, dir, tt.files...)
			var opts []Option
			if tt.kubepods != "" {
				opts = append(opts, WithKubepods(tt.kubepods))
			}
			d, err := Find(host.New(dir), uid, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if d.Version != tt.version || d.Driver != tt.driver {
				t.Errorf("version/driver = %d/%s; want %d/%s", d.Version, d.Driver, tt.version, tt.driver)
			}
			if want := filepath.Join(dir, tt.pod); d.Pod != want {
				t.Errorf("Pod = %s; want %s", d.Pod, want)
			}
			var got []string
			for _, c := range d.Containers {
				if filepath.Dir(c) != d.Pod {
					t.Errorf("container %s is not directly under the pod", c)
				}
				got = append(got, filepath.Base(c))
				if ContainerID(c) != cid && ContainerID(c) != sid {
					t.Errorf("ContainerID(%s) = %s", c, ContainerID(c))
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.container, ",") {
				t.Errorf("containers = %v; want %v", got, tt.container)
			}
		})
	}
}

func TestFindNotFound(t *testing.T) {
	dir := t.TempDir()
	mkfiles(t, dir, "sys/fs/cgroup/cpu/kubepods/burstable/podother/", "sys/fs/cgroup/unified/cgroup.controllers")
	_, err := Find(host.New(dir), uid)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v; want ErrNotFound", err)
	}
	for _, bad := range []string{"", "../x", "a/b"} {
		if _, err := Find(host.New(dir), bad); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("Find(%q) err = %v; want invalid uid", bad, err)
		}
	}
	// v1 without any cpu mount is an error, not "not found".
	dir2 := t.TempDir()
	mkfiles(t, dir2, "sys/fs/cgroup/memory/")
	if _, err := Find(host.New(dir2), uid); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v; want missing controller", err)
	}
}

func TestIDs(t *testing.T) {
	tests := []struct{ in, id, short string }{
		{"/x/" + cid, cid, cid[:12]},
		{"/x/cri-containerd-" + cid + ".scope", cid, cid[:12]},
		{"/x/crio-conmon-" + cid + ".scope", cid, cid[:12]},
		{"/x/docker-abc.scope", "abc", "abc"},
	}
	for _, tt := range tests {
		if got := ContainerID(tt.in); got != tt.id {
			t.Errorf("ContainerID(%s) = %s; want %s", tt.in, got, tt.id)
		}
		if got := ShortID(tt.id); got != tt.short {
			t.Errorf("ShortID(%s) = %s; want %s", tt.id, got, tt.short)
		}
	}
	if got := ShortID("containerd://" + cid); got != cid[:12] {
		t.Errorf("shortID with scheme = %s", got)
	}
}

func TestAsks(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "latency"}}
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Bogus"}}}
	tests := []struct {
		name   string
		ann    map[string]string
		labels map[string]string
		sel    *metav1.LabelSelector
		want   bool
	}{
		{"annotation", map[string]string{"latencytier.io/cpu-quota": "disable"}, nil, nil, true},
		{"annotation other value", map[string]string{"latencytier.io/cpu-quota": "keep"}, nil, nil, false},
		{"nothing", nil, map[string]string{"tier": "latency"}, nil, false},
		{"selector match", nil, map[string]string{"tier": "latency"}, sel, true},
		{"selector miss", nil, map[string]string{"tier": "batch"}, sel, false},
		{"empty selector matches all", nil, nil, &metav1.LabelSelector{}, true},
		{"invalid selector", nil, map[string]string{"tier": "latency"}, bad, false},
	}
	for _, tt := range tests {
		if got := Asks(tt.ann, tt.labels, tt.sel); got != tt.want {
			t.Errorf("%s: Asks = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestGranted(t *testing.T) {
	name := func(ns string) map[string]string { return map[string]string{"kubernetes.io/metadata.name": ns} }
	gw := &v1alpha1.NamespaceSelector{MatchLabels: name("gateway")}
	bad := &v1alpha1.NamespaceSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}
	tests := []struct {
		name string
		ns   map[string]string
		sel  *v1alpha1.NamespaceSelector
		want bool
	}{
		{"no selector grants nothing", name("gateway"), nil, false},
		{"empty selector grants every namespace", name("tenant"), &v1alpha1.NamespaceSelector{}, true},
		{"selected", name("gateway"), gw, true},
		{"not selected", name("tenant"), gw, false},
		{"unknown namespace", nil, gw, false},
		{"invalid selector", name("gateway"), bad, false},
	}
	for _, tt := range tests {
		if got := Granted(tt.ns, tt.sel); got != tt.want {
			t.Errorf("%s: Granted = %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestFindInCpuset(t *testing.T) {
	dir := t.TempDir()
	mkfiles(t, dir,
		"sys/fs/cgroup/cpu/kubepods/pod"+uid+"/"+cid+"/",
		"sys/fs/cgroup/cpuset/kubepods/pod"+uid+"/"+cid+"/",
	)
	d, err := FindIn(host.New(dir), "cpuset", uid)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "sys/fs/cgroup/cpuset/kubepods/pod"+uid); d.Pod != want || len(d.Containers) != 1 {
		t.Fatalf("FindIn(cpuset) = %+v; want pod %s", d, want)
	}
}

// layout is one runtime's container cgroup naming under one kubelet driver.
type layout struct {
	runtime, driver string
	container       func(id string) string // the container's cgroup name
	conmon          func(id string) string // CRI-O's conmon cgroup name, "" for none
}

// Layouts are the container cgroup names of containerd and CRI-O under
// both kubelet drivers.
func layouts() []layout {
	none := func(string) string { return "" }
	return []layout{
		{"containerd", DriverCgroupfs, func(id string) string { return id }, none},
		{"containerd", DriverSystemd, func(id string) string { return "cri-containerd-" + id + ".scope" }, none},
		{"crio", DriverCgroupfs, func(id string) string { return "crio-" + id }, func(id string) string { return "crio-conmon-" + id }},
		{"crio", DriverSystemd, func(id string) string { return "crio-" + id + ".scope" }, func(id string) string { return "crio-conmon-" + id + ".scope" }},
	}
}

// podRel is the burstable pod cgroup of uid for a driver, relative to the
// controller's root.
func podRel(driver string) string {
	if driver == DriverSystemd {
		return "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	}
	return "kubepods/burstable/pod" + uid
}

// TestFindRuntimeLayouts finds the containers of a pod for containerd and
// CRI-O, cgroupfs and systemd drivers, cgroup v1 and v2. CRI-O puts a conmon
// cgroup beside every container, carrying the container's ID: it is not a
// container and must not be listed, and its key must differ from the
// container's so the two never share a setting ID.
func TestFindRuntimeLayouts(t *testing.T) {
	for _, l := range layouts() {
		for _, version := range []int{1, 2} {
			t.Run(l.runtime+"/"+l.driver+"/v"+strconv.Itoa(version), func(t *testing.T) {
				base := "sys/fs/cgroup/cpu,cpuacct/"
				files := []string{}
				if version == 2 {
					base = "sys/fs/cgroup/"
					files = append(files, "sys/fs/cgroup/cgroup.controllers")
				}
				pod := base + podRel(l.driver)
				var want []string
				for _, id := range []string{cid, sid} {
					files = append(files, pod+"/"+l.container(id)+"/")
					want = append(want, l.container(id))
					if c := l.conmon(id); c != "" {
						files = append(files, pod+"/"+c+"/")
					}
				}
				dir := t.TempDir()
				mkfiles(t, dir, files...)
				d, err := Find(host.New(dir), uid)
				if err != nil {
					t.Fatal(err)
				}
				if d.Version != version || d.Driver != l.driver || d.Pod != filepath.Join(dir, pod) {
					t.Fatalf("Find = v%d %s %s; want v%d %s %s", d.Version, d.Driver, d.Pod, version, l.driver, pod)
				}
				var got []string
				for _, c := range d.Containers {
					got = append(got, filepath.Base(c))
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Fatalf("containers = %v; want %v (conmon is not a container)", got, want)
				}
				if l.conmon(cid) != "" {
					ctr, mon := filepath.Join(d.Pod, l.container(cid)), filepath.Join(d.Pod, l.conmon(cid))
					if Key(ctr) == Key(mon) || !isConmon(mon) || isConmon(ctr) || ContainerID(mon) != cid {
						t.Fatalf("Key(container) = %s, Key(conmon) = %s, isConmon = %v/%v, ContainerID(conmon) = %s",
							Key(ctr), Key(mon), isConmon(ctr), isConmon(mon), ContainerID(mon))
					}
				}
			})
		}
	}
}
