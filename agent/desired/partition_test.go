package desired_test

import (
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

const (
	partUID   = "5e1f0c5e-9d7a-4b1e-8f00-0123456789ab"
	partPod   = "kubepods.slice/kubepods-pod5e1f0c5e_9d7a_4b1e_8f00_0123456789ab.slice"
	partApp   = partPod + "/cri-containerd-1111111111110000000000000000000000000000000000000000000000000000.scope"
	partPause = partPod + "/cri-containerd-2222222222220000000000000000000000000000000000000000000000000000.scope"
)

// A Guaranteed pod granted the isolated CPUs, whose app container kubelet's
// static CPU manager gave CPUs 2-3 (its sandbox stays on the shared pool):
// with cpus.partition the app container's CPUs become a partition of the
// chosen type, written through kubepods and the pod slice; the sandbox gets
// none; with None there is no partition knob, and a later pass restores
// what an earlier one made.
func TestPartitionForKubeletsExclusiveCPUs(t *testing.T) {
	root := testroot.New(t, partitionTree(map[string]string{partApp: "2-3", partPause: "0-1,4-7"}, "kubepods.slice", partPod))
	res, iso := "0-1", "2-3"
	spec := func(p v1alpha1.CPUPartition) v1alpha1.TuningSpec {
		return v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Reserved: &res, Isolated: &iso, NamespaceSelector: &v1alpha1.NamespaceSelector{}, Partition: p}}
	}
	pods := []podcgroup.Pod{{UID: partUID, Namespace: "ns", Name: "gw", QOSClass: "Guaranteed",
		Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}}}
	partKnobs := func(ds desired.State) map[string]string {
		out := map[string]string{}
		for _, k := range ds.Knobs {
			if strings.HasPrefix(k.ID, "partition/") {
				out[k.ID] = k.Desired
			}
		}
		return out
	}
	ds := desired.Render(root, sysctl.Layout{}, spec(v1alpha1.CPUPartitionIsolated), pods, nil)
	want := map[string]string{
		"partition/exclusive/kubepods.slice":                                            "2-3",
		"partition/exclusive/" + partPod:                                                "2-3",
		"partition/exclusive/" + partPod + "/111111111111":                              "2-3",
		"partition/kubepods-pod5e1f0c5e_9d7a_4b1e_8f00_0123456789ab.slice/111111111111": "isolated",
	}
	got := partKnobs(ds)
	if len(got) != len(want) {
		t.Fatalf("partition knobs %v, want %v (results %+v)", got, want, ds.Results)
	}
	for id, v := range want {
		if got[id] != v {
			t.Errorf("%s = %q, want %q (all: %v)", id, got[id], v, got)
		}
	}
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	if _, err := e.Apply(apply.Meta{Profile: "p", Undetermined: ds.Undetermined}, ds.Knobs); err != nil {
		t.Fatal(err)
	}
	if v := testroot.Read(t, root.Cgroup(partApp, "cpuset.cpus.partition")); v != "isolated" {
		t.Errorf("app partition = %q, want isolated", v)
	}
	ds = desired.Render(root, sysctl.Layout{}, spec(v1alpha1.CPUPartitionNone), pods, nil)
	if got := partKnobs(ds); len(got) != 0 {
		t.Errorf("None: partition knobs %v, want none", got)
	}
	if _, err := e.Apply(apply.Meta{Profile: "p", Undetermined: ds.Undetermined}, ds.Knobs); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"kubepods.slice", partPod, partApp} {
		if v := testroot.Read(t, root.Cgroup(d, "cpuset.cpus.exclusive")); v != "" {
			t.Errorf("%s exclusive after the profile dropped partitions = %q, want empty", d, v)
		}
	}
	if v := testroot.Read(t, root.Cgroup(partApp, "cpuset.cpus.partition")); v != "member" {
		t.Errorf("app partition after the profile dropped partitions = %q, want member", v)
	}
	// Without kubelet's static CPU manager there are no exclusive CPUs to
	// partition: one Unsupported result says so.
	if err := os.Remove(root.KubeletDir("cpu_manager_state")); err != nil {
		t.Fatal(err)
	}
	ds = desired.Render(root, sysctl.Layout{}, spec(v1alpha1.CPUPartitionRoot), pods, nil)
	var kubelet []v1alpha1.SettingResult
	for _, r := range ds.Results {
		if strings.HasPrefix(r.Setting, "partition/") {
			kubelet = append(kubelet, r)
		}
	}
	if got := partKnobs(ds); len(got) != 0 || len(kubelet) != 1 || kubelet[0].State != v1alpha1.SettingUnsupported || !strings.Contains(kubelet[0].Message, "static CPU manager") {
		t.Errorf("without kubelet's static policy: knobs %v, results %+v; want one Unsupported result naming the static CPU manager", got, kubelet)
	}
}

// The same pod under kubelet's cgroupfs driver (kubepods/pod<uid>/<id>, no
// slices): the partition is made through kubepods and the pod cgroup just
// as under systemd (before, a node with the cgroupfs driver reported the
// partition Unsupported: "no kubepods.slice cgroup").
func TestPartitionUnderTheCgroupfsDriver(t *testing.T) {
	const (
		pod = "kubepods/pod" + partUID
		app = pod + "/1111111111110000000000000000000000000000000000000000000000000000"
	)
	root := testroot.New(t, partitionTree(map[string]string{app: "2-3"}, "kubepods", pod))
	res, iso := "0-1", "2-3"
	spec := v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Reserved: &res, Isolated: &iso, NamespaceSelector: &v1alpha1.NamespaceSelector{}, Partition: v1alpha1.CPUPartitionRoot}}
	pods := []podcgroup.Pod{{UID: partUID, Namespace: "ns", Name: "gw", QOSClass: "Guaranteed",
		Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}}}
	ds := desired.Render(root, sysctl.Layout{}, spec, pods, nil)
	for _, r := range ds.Results {
		if strings.HasPrefix(r.Setting, "partition/") {
			t.Errorf("result %s %s: %s, want a knob", r.Setting, r.State, r.Message)
		}
	}
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	if _, err := e.Apply(apply.Meta{Profile: "p", Undetermined: ds.Undetermined}, ds.Knobs); err != nil {
		t.Fatal(err)
	}
	for d, f := range map[string]string{"kubepods": "cpuset.cpus.exclusive", pod: "cpuset.cpus.exclusive", app: "cpuset.cpus.partition"} {
		want := "2-3"
		if f == "cpuset.cpus.partition" {
			want = "root"
		}
		if v := testroot.Read(t, root.Cgroup(d, f)); v != want {
			t.Errorf("%s/%s = %q, want %q", d, f, v, want)
		}
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if v := testroot.Read(t, root.Cgroup("kubepods", "cpuset.cpus.exclusive")); v != "" {
		t.Errorf("kubepods exclusive after revert = %q, want empty", v)
	}
}

// partitionTree is a cgroup v2 host with cpuset partitions (6.8+): the
// containers with the cpuset.cpus kubelet wrote (cpus: container cgroup →
// CPUs) and their ancestors (dirs), every one with empty exclusive CPUs
// and a member partition, and kubelet's static CPU manager state giving
// the pod partUID's app container CPUs 2-3.
func partitionTree(cpus map[string]string, dirs ...string) map[string]string {
	files := map[string]string{
		"sys/fs/cgroup/cgroup.controllers":       "cpuset cpu\n",
		"sys/fs/cgroup/cgroup.subtree_control":   "cpuset cpu\n",
		"sys/fs/cgroup/cpuset.cpus.isolated":     "\n",
		"sys/fs/cgroup/system.slice/cpuset.cpus": "\n",
		"var/lib/kubelet/cpu_manager_state": `{"policyName":"static","defaultCpuSet":"0-1,4-7","entries":{"` + partUID +
			`":{"app":"2-3"}},"checksum":1}`,
	}
	for d, c := range cpus {
		files["sys/fs/cgroup/"+d+"/cpuset.cpus"] = c + "\n"
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		files["sys/fs/cgroup/"+d+"/cpuset.cpus.exclusive"] = "\n"
		files["sys/fs/cgroup/"+d+"/cpuset.cpus.partition"] = "member\n"
		if _, ok := files["sys/fs/cgroup/"+d+"/cpuset.cpus"]; !ok {
			files["sys/fs/cgroup/"+d+"/cpuset.cpus"] = "\n"
		}
	}
	return files
}
