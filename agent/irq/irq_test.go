package irq

import (
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/internal/testroot"
)

func TestEffectiveWithin(t *testing.T) {
	if !effectiveWithin("1", "0-1") || effectiveWithin("1", "0") || effectiveWithin("", "0") {
		t.Error("effectiveWithin")
	}
}

func TestKnobsFromFixture(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"proc/irq/default_smp_affinity":       "f",
		"proc/irq/9/smp_affinity_list":        "0-3",
		"proc/irq/24/smp_affinity_list":       "0-3",
		"proc/irq/24/effective_affinity_list": "2",
		"proc/irq/0/smp_affinity":             "f", // no _list: skipped
		"proc/1/stat":                         "",
		"proc/interrupts":                     "           CPU0       CPU1\n  9:          0          0   IO-APIC   9-fasteoi   acpi\n 24:         1          0  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n",
	})
	knobs, err := Knobs(root, cpuset.New(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(knobs) != 3 || knobs[0].ID != defaultID || knobs[0].Desired != "3" || knobs[1].ID != "irq/9" || knobs[2].ID != "irq/24" {
		t.Fatalf("knobs = %+v", knobs)
	}
	if knobs[2].Label != "IRQ 24 (virtio1-req.0)" || knobs[2].VerifyPath == "" || !knobs[2].RefusalIsImmovable {
		t.Errorf("irq 24 knob = %+v", knobs[2])
	}
	if knobs[1].VerifyPath != "" {
		t.Errorf("irq 9 has no effective_affinity_list, got VerifyPath %q", knobs[1].VerifyPath)
	}
}
