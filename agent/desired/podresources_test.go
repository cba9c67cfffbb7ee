package desired_test

import (
	"strings"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"latencytier.io/latencytier/agent/cpumanager/podresourcestest"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// TestPartitionFromPodResources: with no checkpoint file at all, kubelet's
// PodResources API alone says the app container holds CPUs 2-3 (it names
// the pod by namespace/name, not UID): its CPUs become a partition, and the
// pod's cpuset result says the API was read.
func TestPartitionFromPodResources(t *testing.T) {
	files := map[string]string{
		"sys/devices/system/cpu/online":               "0-7\n",
		"sys/fs/cgroup/cgroup.controllers":            "cpuset cpu\n",
		"sys/fs/cgroup/cgroup.subtree_control":        "cpuset cpu\n",
		"sys/fs/cgroup/cpuset.cpus.isolated":          "\n",
		"sys/fs/cgroup/system.slice/cpuset.cpus":      "\n",
		"sys/fs/cgroup/" + partApp + "/cpuset.cpus":   "2-3\n",
		"sys/fs/cgroup/" + partPause + "/cpuset.cpus": "0-1,4-7\n",
	}
	for _, d := range []string{"kubepods.slice", partPod, partApp, partPause} {
		files["sys/fs/cgroup/"+d+"/cpuset.cpus.exclusive"] = "\n"
		files["sys/fs/cgroup/"+d+"/cpuset.cpus.partition"] = "member\n"
		if _, ok := files["sys/fs/cgroup/"+d+"/cpuset.cpus"]; !ok {
			files["sys/fs/cgroup/"+d+"/cpuset.cpus"] = "\n"
		}
	}
	root := testroot.New(t, files)
	podresourcestest.Serve(t, root, &podresourcestest.Kubelet{Allocatable: []int64{2, 3, 4, 5, 6, 7},
		Pods: []*podresourcesv1.PodResources{{Namespace: "ns", Name: "gw", Containers: []*podresourcesv1.ContainerResources{
			podresourcestest.Container("app", 2, 3)}}}})
	res, iso := "0-1", "2-3"
	spec := v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Reserved: &res, Isolated: &iso,
		NamespaceSelector: &v1alpha1.NamespaceSelector{}, Partition: v1alpha1.CPUPartitionIsolated}}
	pods := []podcgroup.Pod{{UID: partUID, Namespace: "ns", Name: "gw", QOSClass: "Guaranteed",
		Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}}}
	ds := desired.Render(root, sysctl.Layout{}, spec, pods, nil)
	got := map[string]string{}
	for _, k := range ds.Knobs {
		if strings.HasPrefix(k.ID, "partition/") {
			got[k.ID] = k.Desired
		}
	}
	if got["partition/kubepods-pod5e1f0c5e_9d7a_4b1e_8f00_0123456789ab.slice/111111111111"] != "isolated" ||
		got["partition/exclusive/"+partPod+"/111111111111"] != "2-3" {
		t.Fatalf("partition knobs %v; want the app container's 2-3 made an isolated partition (results %+v)", got, ds.Results)
	}
	for _, r := range ds.Results {
		if strings.HasPrefix(r.Setting, "cpuset/pod/") && !strings.Contains(r.Message, "PodResources API") {
			t.Errorf("%s: %q does not say the PodResources API was read", r.Setting, r.Message)
		}
	}
}
