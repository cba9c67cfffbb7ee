package loop

import (
	"strings"
	"testing"
)

// A lifted idle limit is blamed on the tools that write PM QoS and cpuidle,
// not on a sysctl writer.
func TestCulpritOfPowerDrift(t *testing.T) {
	if got := culprit("power/cpu3/resume-latency", 0); !strings.Contains(got, "tuned") || strings.Contains(got, "sysctl") {
		t.Errorf("culprit = %q", got)
	}
}
