package power

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A profile that lets no online CPU idle (maxIdleExitLatency 0 everywhere)
// is reported with the numbers; a limit of 0 on the isolated CPUs alone,
// or on classes that leave CPUs out, is not.
func TestPollingEveryCPU(t *testing.T) {
	zero, ten := &v1alpha1.CPUPower{MaxIdleExitLatency: us(0)}, &v1alpha1.CPUPower{MaxIdleExitLatency: us(10)}
	governorOnly := &v1alpha1.CPUPower{Governor: gov(v1alpha1.GovernorPerformance)}
	online := cpuset.New(0, 1, 2, 3, 4, 5, 6, 7)
	for _, c := range []struct {
		name string
		spec v1alpha1.TuningSpec
		want string // "" for no finding
	}{
		{"all 0us", tuning("", "", v1alpha1.PowerSpec{All: zero}), "power.all set maxIdleExitLatency 0us on all 8 online CPUs (0-7)"},
		{"all 10us", tuning("", "", v1alpha1.PowerSpec{All: ten}), ""},
		{"all governor only", tuning("", "", v1alpha1.PowerSpec{All: governorOnly}), ""},
		{"both classes 0us, covering", tuning("0-1", "2-7", v1alpha1.PowerSpec{Reserved: zero, Isolated: zero}), "power.reserved and power.isolated set maxIdleExitLatency 0us on all 8 online CPUs"},
		{"both classes 0us, CPUs left out", tuning("0", "2-7", v1alpha1.PowerSpec{Reserved: zero, Isolated: zero}), ""},
		{"isolated 0us only", tuning("0-1", "2-7", v1alpha1.PowerSpec{Reserved: ten, Isolated: zero}), ""},
		{"no power", v1alpha1.TuningSpec{}, ""},
	} {
		f := pollingEveryCPU(c.spec, online)
		switch {
		case c.want == "" && f != nil:
			t.Errorf("%s: finding %+v, want none", c.name, f)
		case c.want != "" && (f == nil || f.Type != FindingPollingEveryCPU || !strings.Contains(f.Message, c.want)):
			t.Errorf("%s: finding %+v, want %s saying %q", c.name, f, FindingPollingEveryCPU, c.want)
		}
	}
}
