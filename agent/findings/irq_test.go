package findings

import (
	"testing"

	"k8s.io/utils/cpuset"
)

const interrupts1 = `           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 36:        100        200  PCI-MSIX-0000:00:05.0   0-edge      virtio1-req.0
LOC:       5000       6000   Local timer interrupts
ERR:          0
`

const interrupts2 = `           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 36:        150        320  PCI-MSIX-0000:00:05.0   0-edge      virtio1-req.0
 41:          0          7  PCI-MSIX-0000:00:04.0   1-edge      virtio0-input.0
LOC:       5100       6900   Local timer interrupts
ERR:          0
`

func TestCounterTableDelta(t *testing.T) {
	a, err := ParseCounterTable(interrupts1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseCounterTable(interrupts2)
	if err != nil {
		t.Fatal(err)
	}
	d := b.deltaOn(a, cpuset.New(1), isNumber)
	if len(d) != 2 || d[0].key != "36" || d[0].n != 120 || d[1].key != "41" || d[1].n != 7 {
		t.Fatalf("delta on CPU1 = %+v, want irq 36:120, 41:7", d)
	}
	if lastField(d[0].label) != "virtio1-req.0" {
		t.Errorf("label %q", d[0].label)
	}
	if d := b.deltaOn(a, cpuset.New(0), isNumber); len(d) != 1 || d[0].n != 50 {
		t.Errorf("delta on CPU0 = %+v, want irq 36:50", d)
	}
	if d := b.deltaOn(a, cpuset.New(1), func(k string) bool { return k == "LOC" }); len(d) != 1 || d[0].n != 900 {
		t.Errorf("LOC delta = %+v", d)
	}
}
