package cpuquota

import (
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cgstat"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
)

const sid = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

// runtimeLayout names one runtime's container cgroups under one driver;
// conmon is "" for runtimes without a conmon cgroup.
type runtimeLayout struct {
	name              string
	systemd           bool
	container, conmon string // format with the container ID appended
}

var runtimeLayouts = []runtimeLayout{
	{"containerd/cgroupfs", false, "", ""},
	{"containerd/systemd", true, "cri-containerd-%.scope", ""},
	{"crio/cgroupfs", false, "crio-%", "crio-conmon-%"},
	{"crio/systemd", true, "crio-%.scope", "crio-conmon-%.scope"},
}

func (l runtimeLayout) dir(format, id string) string {
	if format == "" {
		return id
	}
	return strings.Replace(format, "%", id, 1)
}

// TestRevertRuntimeLayouts applies and reverts quota removal through the
// engine for containerd and CRI-O, cgroupfs and systemd drivers, cgroup v1
// and v2, and checks every cgroup is back at its own original, the conmon
// cgroups never touched. (With conmon keyed like its container, one journal
// entry covered two cgroups: one original was lost on revert.)
func TestRevertRuntimeLayouts(t *testing.T) {
	for _, l := range runtimeLayouts {
		for _, v := range []int{1, 2} {
			t.Run(l.name+"/v"+strconv.Itoa(v), func(t *testing.T) { testRevertLayout(t, l, v) })
		}
	}
}

func testRevertLayout(t *testing.T, l runtimeLayout, version int) {
	podDir := "kubepods/burstable/pod" + uid
	if l.systemd {
		podDir = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc + ".slice"
	}
	file, equal, limited, unlimited := cgstat.QuotaFileV1, equalV1, func(q int) string { return strconv.Itoa(q) }, "-1"
	base := "sys/fs/cgroup/cpu,cpuacct/"
	files := map[string]string{}
	if version == 2 {
		file, equal, limited, unlimited = cgstat.MaxFileV2, equalV2, func(q int) string { return strconv.Itoa(q) + " 100000" }, "max 100000"
		base = "sys/fs/cgroup/"
		files["sys/fs/cgroup/cgroup.controllers"] = "cpuset cpu io memory pids"
	}
	podDir = base + podDir
	files[podDir+"/"+file] = limited(300000)
	files[podDir+"/"+l.dir(l.container, cid)+"/"+file] = limited(200000)
	files[podDir+"/"+l.dir(l.container, sid)+"/"+file] = unlimited
	if l.conmon != "" {
		files[podDir+"/"+l.dir(l.conmon, cid)+"/"+file] = limited(50000)
		files[podDir+"/"+l.dir(l.conmon, sid)+"/"+file] = unlimited
	}
	root := testroot.New(t, files)
	knobs, results, err := Knobs(root, []podcgroup.Pod{pod(true)})
	if err != nil || len(results) != 0 {
		t.Fatalf("Knobs: %v %v", results, err)
	}
	seen := map[string]bool{}
	for _, k := range knobs {
		if seen[k.ID] {
			t.Fatalf("two knobs share setting %s", k.ID)
		}
		seen[k.ID] = true
	}
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	if _, err := e.Apply(apply.Meta{Profile: "p"}, knobs); err != nil {
		t.Fatal(err)
	}
	for rel, orig := range files {
		if !strings.HasSuffix(rel, file) {
			continue
		}
		got := testroot.Read(t, root.Path(rel))
		switch {
		case strings.Contains(rel, "crio-conmon-"):
			if got != orig {
				t.Errorf("apply touched conmon %s: %s → %s", rel, orig, got)
			}
		case !equal(got, unlimited):
			t.Errorf("after apply %s = %s; want unlimited", rel, got)
		}
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	for rel, orig := range files {
		if got := testroot.Read(t, root.Path(rel)); strings.HasSuffix(rel, file) && got != orig {
			t.Errorf("after revert %s = %s; want its original %s", rel, got, orig)
		}
	}
}
