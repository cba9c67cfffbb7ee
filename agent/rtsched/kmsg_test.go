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
		if got, err := kmsgHas(p, throttleMsg); err != nil || got != c.want {
			t.Errorf("%s: kmsgHas = %v, want %v", name, got, c.want)
		}
	}
}

// syslog(2) text ("<pri>[time] text" a line): only lines at facility 0
// are the kernel's. The kernel repeats a record's prefix on each of its
// lines, so a continuation line counts as its record's; a line without a
// prefix counts as nobody's.
func TestSyslogLine(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       string
		ok         bool
	}{
		{"kernel, warning", "<4>[  12.345678] sched: RT throttling activated", "[  12.345678] sched: RT throttling activated", true},
		{"kernel, no time", "<4>sched: RT throttling activated", "sched: RT throttling activated", true},
		{"kernel, emerg", "<0>[   1.000000] " + throttleMsg, "[   1.000000] " + throttleMsg, true},
		{"user facility (<6> or <14> written)", "<14>[  12.4] " + throttleMsg, "", false},
		{"user, <0> asked", "<8>[  12.5] " + throttleMsg, "", false},
		{"daemon facility", "<30>[  12.6] " + throttleMsg, "", false},
		{"no prefix", throttleMsg, "", false},
		{"unclosed prefix", "<4 " + throttleMsg, "", false},
		{"bad priority", "<x>" + throttleMsg, "", false},
		{"negative priority", "<-1>" + throttleMsg, "", false},
	} {
		got, ok := syslogLine([]byte(c.line))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: syslogLine(%q) = %q, %v; want %q, %v", c.name, c.line, got, ok, c.want, c.ok)
		}
	}
}

// Over a whole READ_ALL buffer: the message on a continuation line of a
// kernel record counts; on a continuation of a user-space record, or on a
// line without a prefix, it does not.
func TestSyslogTextHas(t *testing.T) {
	for name, c := range map[string]struct {
		text string
		want bool
	}{
		"kernel":                  {"<6>[ 1.0] eth0: link up\n<4>[ 2.0] " + throttleMsg + "\n", true},
		"kernel continuation":     {"<6>[ 1.0] eth0: link up\n<4>[ 2.0] rt: note\n<4>[ 2.0] " + throttleMsg + "\n", true},
		"user space":              {"<6>[ 1.0] eth0: link up\n<14>[ 2.0] " + throttleMsg + "\n", false},
		"user continuation":       {"<14>[ 2.0] tenant says\n<14>[ 2.0] " + throttleMsg + "\n", false},
		"unprefixed after kernel": {"<6>[ 1.0] eth0: link up\n" + throttleMsg + "\n", false},
		"empty":                   {"", false},
	} {
		if got := syslogTextHas([]byte(c.text), throttleMsg); got != c.want {
			t.Errorf("%s: syslogTextHas = %v, want %v", name, got, c.want)
		}
	}
}
