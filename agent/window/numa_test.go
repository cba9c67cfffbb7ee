package window

import (
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
)

func TestNumaNodes(t *testing.T) {
	root := testroot.Lines(t, map[string]string{
		"sys/devices/system/node/node0/cpulist": "0-3,8-11",
		"sys/devices/system/node/node1/cpulist": "4-7",
		"sys/devices/system/node/online":        "0-1",
	})
	got := numaNodes(root)
	if len(got) != 2 || got[0].String() != "0-3,8-11" || got[1].String() != "4-7" {
		t.Fatalf("numaNodes = %v", got)
	}
}
