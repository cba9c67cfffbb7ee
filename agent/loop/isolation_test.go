package loop

import (
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// The status account probes partitions in the kubepods cgroup kubelet
// really uses: with the cgroupfs driver that is "kubepods", not
// "kubepods.slice", and a node whose partitions apply there must not be
// reported Unsupported for lacking a kubepods.slice.
func TestIsolationProbesTheKubepodsCgroupKubeletUses(t *testing.T) {
	for _, kubepods := range []string{"kubepods.slice", "kubepods"} {
		t.Run(kubepods, func(t *testing.T) {
			root := testroot.New(t, map[string]string{
				"sys/fs/cgroup/cgroup.controllers":                     "cpuset cpu\n",
				"sys/fs/cgroup/cgroup.subtree_control":                 "cpuset cpu\n",
				"sys/fs/cgroup/cpuset.cpus.isolated":                   "\n",
				"sys/fs/cgroup/" + kubepods + "/cpuset.cpus":           "\n",
				"sys/fs/cgroup/" + kubepods + "/cpuset.cpus.exclusive": "\n",
				"sys/fs/cgroup/" + kubepods + "/cpuset.cpus.partition": "member\n",
			})
			res, iso := "0-1", "2-3"
			cpus := &v1alpha1.CPUSpec{Reserved: &res, Isolated: &iso, Partition: v1alpha1.CPUPartitionIsolated}
			st := isolation(root, cpus, nil)
			if st == nil {
				t.Fatal("no isolation status")
			}
			if st.Partitions == v1alpha1.IsolationUnsupported {
				t.Errorf("partitions Unsupported (%s), want a supported node's state", st.Message)
			}
			if st.Partitions != v1alpha1.IsolationWaiting {
				t.Errorf("partitions %s, want %s with no granted pod partitioned", st.Partitions, v1alpha1.IsolationWaiting)
			}
		})
	}
}
