package desired

import (
	"os"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A running irqbalance is reported once, by measure's IRQBalanceNotBanned
// finding (which knows whether it is banned from the isolated CPUs); the
// desired state only keeps its pid to name the culprit of IRQ drift.
func TestIRQBalanceNamedNotReported(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"proc/irq/24/smp_affinity_list": "0-1",
		"proc/412/comm":                 "irqbalance\n",
		"proc/412/stat":                 "",
		"usr/sbin/irqbalance":           "the host's binary",
	})
	if err := os.Symlink(root.Path("usr", "sbin", "irqbalance"), root.Proc("412", "exe")); err != nil {
		t.Fatal(err)
	}
	res := "0"
	spec := v1alpha1.TuningSpec{
		CPUs: &v1alpha1.CPUSpec{Reserved: &res},
		IRQ:  &v1alpha1.IRQSpec{Affinity: v1alpha1.IRQAffinityReserved},
	}
	st := Render(root, sysctl.Layout{}, spec, nil, nil)
	if st.IRQBalancePID != 412 {
		t.Errorf("IRQBalancePID = %d, want 412", st.IRQBalancePID)
	}
}
