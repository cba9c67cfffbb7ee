package rtsched

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Only records the kernel logged (facility 0) count: a line written to
// /dev/kmsg from user space (facility user=1, or any facility the writer
// names except 0) must not raise the RT-throttling finding.
func TestKernelRecord(t *testing.T) {
	for _, c := range []struct {
		name, rec string
		want      string
		ok        bool
	}{
		{"kernel, warning", "4,1234,5678901,-;sched: RT throttling activated\n", "sched: RT throttling activated", true},
		{"kernel, with dict", "4,1,2,-,caller=T12;sched: RT throttling activated\n SUBSYSTEM=cpu\n", "sched: RT throttling activated", true},
		{"user facility", "12,1235,5679000,-;sched: RT throttling activated\n", "", false},
		{"user, <0> asked", "8,1236,5679001,-;sched: RT throttling activated\n", "", false},
		{"daemon facility", "30,1,2,-;sched: RT throttling activated\n", "", false},
		{"no prefix", "sched: RT throttling activated\n", "", false},
		{"bad priority", "x,1,2,-;sched: RT throttling activated\n", "", false},
		{"dict only holds it", "6,1,2,-;other\n MSG=sched: RT throttling activated\n", "other", true},
	} {
		got, ok := kernelRecord([]byte(c.rec))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: kernelRecord(%q) = %q, %v; want %q, %v", c.name, c.rec, got, ok, c.want, c.ok)
		}
	}
}

// A /dev/kmsg holding the throttling line only from user space (facility
// user) does not count as the kernel having throttled; the kernel's own
// record does.
func TestKmsgHasCountsOnlyKernelRecords(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		log  string
		want bool
	}{
		"user space": {"6,100,5,-;eth0: link up\n12,101,6,-;" + throttleMsg + "\n", false},
		"kernel":     {"6,100,5,-;eth0: link up\n4,101,6,-;" + throttleMsg + "\n", true},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(p, []byte(c.log), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := kmsgHas(p, throttleMsg); got != c.want {
			t.Errorf("%s: kmsgHas = %v, want %v", name, got, c.want)
		}
	}
}
