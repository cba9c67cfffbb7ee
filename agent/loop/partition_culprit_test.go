package loop

import (
	"strings"
	"testing"
)

// A partition found changed is the kernel's doing (hotplug invalidates
// it) or a runtime's, never "another sysctl writer".
func TestPartitionDriftCulprit(t *testing.T) {
	if got := culprit("partition/kubepods-pod1.slice/abc", 0); !strings.Contains(got, "hotplug") || strings.Contains(got, "sysctl") {
		t.Errorf("culprit = %q", got)
	}
}
