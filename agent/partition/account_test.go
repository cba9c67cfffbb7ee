package partition_test

import (
	"slices"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/partition"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func TestAccount(t *testing.T) {
	iso := "2-3"
	spec := func(p v1alpha1.CPUPartition) *v1alpha1.CPUSpec {
		return &v1alpha1.CPUSpec{Isolated: &iso, Partition: p}
	}
	live := partition.Capability{Supported: true, IsolatedList: true}
	applied := []v1alpha1.SettingResult{
		{Setting: "cpuset/system.slice", State: v1alpha1.SettingApplied},
		{Setting: "cpuset/system.slice/AllowedCPUs", State: v1alpha1.SettingApplied},
		{Setting: "cpuset/pod/ns/p/uid", State: v1alpha1.SettingUnsupported, Message: "kubelet places it"},
		{Setting: "irq/24", State: v1alpha1.SettingApplied},
		{Setting: "irq/36", State: v1alpha1.SettingImmovable},
		{Setting: "partition/exclusive/kubepods.slice", State: v1alpha1.SettingApplied},
		{Setting: "partition/kubepods-pod1.slice/abc", State: v1alpha1.SettingApplied},
	}
	full := []string{"isolcpus=managed_irq,domain,2-3", "nohz_full=2-3", "rcu_nocbs=2-3"}
	type want struct {
		part, conf, irq v1alpha1.IsolationMechanism
		boot            []v1alpha1.BootIsolationGoal
		msg             string
	}
	all := []v1alpha1.BootIsolationGoal{v1alpha1.BootGoalTick, v1alpha1.BootGoalRCUCallbacks, v1alpha1.BootGoalManagedIRQs}
	for _, tc := range []struct {
		name    string
		cpus    *v1alpha1.CPUSpec
		node    partition.Capability
		cmdline []string
		results []v1alpha1.SettingResult
		want    want
	}{
		{"everything live, nothing on the command line", spec(v1alpha1.CPUPartitionIsolated), live, nil, applied,
			want{v1alpha1.IsolationLive, v1alpha1.IsolationLive, v1alpha1.IsolationLive, all, ""}},
		{"the command line gives the rest", spec(v1alpha1.CPUPartitionRoot), live, full, applied,
			want{v1alpha1.IsolationLive, v1alpha1.IsolationLive, v1alpha1.IsolationLive, nil, ""}},
		{"isolcpus without managed_irq", spec(v1alpha1.CPUPartitionRoot), live, []string{"isolcpus=2-3", "nohz_full=2,3", "rcu_nocbs=0-3"}, applied,
			want{v1alpha1.IsolationLive, v1alpha1.IsolationLive, v1alpha1.IsolationLive, []v1alpha1.BootIsolationGoal{v1alpha1.BootGoalManagedIRQs}, ""}},
		{"no granted pod yet", spec(v1alpha1.CPUPartitionIsolated), live, full, applied[:5],
			want{v1alpha1.IsolationWaiting, v1alpha1.IsolationLive, v1alpha1.IsolationLive, nil, "partitions: no granted pod holds exclusive CPUs"}},
		{"partitions off", spec(""), live, full, nil,
			want{v1alpha1.IsolationOff, v1alpha1.IsolationOff, v1alpha1.IsolationOff, nil, ""}},
		{"6.1 kernel", spec(v1alpha1.CPUPartitionIsolated), partition.Capability{Reason: "no cpuset.cpus.exclusive (6.7)"}, full, applied,
			want{v1alpha1.IsolationUnsupported, v1alpha1.IsolationLive, v1alpha1.IsolationLive, nil, "partitions: no cpuset.cpus.exclusive (6.7)"}},
		{"an invalid partition", spec(v1alpha1.CPUPartitionIsolated), live, full,
			append(slices.Clone(applied), v1alpha1.SettingResult{Setting: "partition/kubepods-pod2.slice/def", State: v1alpha1.SettingInvalid, Message: "the kernel holds the isolated partition invalid: x"}),
			want{v1alpha1.IsolationFailed, v1alpha1.IsolationLive, v1alpha1.IsolationLive, nil, "partitions: partition/kubepods-pod2.slice/def Invalid: the kernel holds"}},
		{"confinement failed", spec(v1alpha1.CPUPartitionNone), live, full,
			[]v1alpha1.SettingResult{{Setting: "cpuset/system.slice", State: v1alpha1.SettingFailed, Message: "EBUSY"}},
			want{v1alpha1.IsolationOff, v1alpha1.IsolationFailed, v1alpha1.IsolationOff, nil, "confinement: cpuset/system.slice Failed: EBUSY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := partition.Account(tc.cpus, tc.node, tc.cmdline, tc.results)
			if got == nil {
				t.Fatal("nil status for a profile with isolated CPUs")
			}
			w := tc.want
			if got.Partitions != w.part || got.Confinement != w.conf || got.IRQSteering != w.irq || !slices.Equal(got.NeedsBoot, w.boot) || !strings.HasPrefix(got.Message, w.msg) || (w.msg == "" && got.Message != "") {
				t.Errorf("Account = %+v, want %+v", *got, w)
			}
		})
	}
	if got := partition.Account(&v1alpha1.CPUSpec{}, live, nil); got != nil {
		t.Errorf("Account without isolated CPUs = %+v, want nil", got)
	}
}
