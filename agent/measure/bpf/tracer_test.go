package bpf

import "testing"

// TestLayoutMatchesProgram: the Go mirror of runqlat.bpf.c's sizes is the
// object's.
func TestLayoutMatchesProgram(t *testing.T) {
	spec, err := loadRunqlat()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint32{"pod_slot_hists": PodSlots, "pod_cgroups": MaxPodCgroups, "attr": AttrEntries} {
		if got := spec.Maps[name].MaxEntries; got != want {
			t.Errorf("map %s holds %d entries in the object, %d in Go", name, got, want)
		}
	}
}
