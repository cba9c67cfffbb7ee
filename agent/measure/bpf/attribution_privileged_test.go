//go:build privileged

package bpf

import (
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"latencytier.io/latencytier/agent/host"

	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/podcgroup"
)

// TestAttributionMapFull fills the (victim, offender) map from user space
// with 10 000 distinct offender cgroups of a fake victim (more than it
// holds: the inserts past AttrEntries fail in user space, as they would in
// the kernel) and runs a real measured task: the program reports no error,
// its charges land in the victim's OtherNs, the read stays bounded by the
// map, and once the read has emptied the map windows are attributed again,
// each charge in the window of its wait.
// It writes only its own cgroups (no kernellock).
func TestAttributionMapFull(t *testing.T) {
	pod := cgtest.V1Pod(t, "cpu", podcgroup.DriverCgroupfs, "ltattrmap-", nil)
	tr, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	ino, err := host.New("/").Inode(pod.CtrDir)
	if err != nil {
		t.Fatal(err)
	}
	const fake = uint64(1) << 62
	filled := 0
	for i := 0; i < 10000; i++ {
		k := runqlatAttrKey{Victim: fake}
		k.Off.Class = uint32(KindTask)
		k.Off.Id = uint64(1000 + i)
		if err := tr.attr.Put(&k, make([]runqlatCharged, possibleCPUs(t))); err == nil {
			filled++
		}
	}
	if filled != AttrEntries {
		t.Fatalf("filled %d entries of %d", filled, AttrEntries)
	}
	cgtest.StartIn(t, pod.CtrDir, "sh", "-c", "while :; do sleep 0.001; done")
	if err := tr.SetPodCgroups([]PodCgroup{{ID: ino}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	a, err := tr.ReadAttribution()
	if err != nil {
		t.Fatalf("reading a full map: %v", err)
	}
	if len(a.Charges) > AttrEntries {
		t.Errorf("%d charges read from a map of %d", len(a.Charges), AttrEntries)
	}
	v := victimOf(a, ino)
	t.Logf("full map: %d charges read; the real victim waited %d ns in %d waits, %d ns of it to other", len(a.Charges), v.WaitNs, v.Waits, v.OtherNs)
	if v.Waits < 10 || v.OtherNs == 0 || v.OtherNs > v.WaitNs {
		t.Fatalf("with the map full the victim's waits should go to other: %+v", v)
	}

	// The window that began with the read still found the map full while
	// the read deleted its entries; the one after that has room.
	if _, err := tr.ReadAttribution(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	a, err = tr.ReadAttribution()
	if err != nil {
		t.Fatal(err)
	}
	v = victimOf(a, ino)
	var charged uint64
	for _, c := range a.Charges {
		if c.Victim == ino {
			charged += c.Ns
		}
	}
	t.Logf("next window: %d charges; victim waited %d ns, %d ns charged, %d ns other", len(a.Charges), v.WaitNs, charged, v.OtherNs)
	if v.Waits == 0 || v.OtherNs != 0 || charged != v.WaitNs {
		t.Errorf("after the read emptied the map, the next window should be attributed: %+v, %d ns charged", v, charged)
	}
}

func possibleCPUs(t *testing.T) int {
	t.Helper()
	n, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func victimOf(a *Attribution, id uint64) VictimWait {
	for _, v := range a.Victims {
		if v.Victim == id {
			return v
		}
	}
	return VictimWait{}
}
