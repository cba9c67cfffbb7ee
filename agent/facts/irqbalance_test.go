package facts

import (
	"os"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
)

func TestBannedCPUs(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want string
	}{
		{"PATH=/bin\x00IRQBALANCE_BANNED_CPULIST=2-3\x00", "2-3"},
		{"IRQBALANCE_BANNED_CPUS=0000000c\x00", "2-3"},
		{"IRQBALANCE_BANNED_CPUS=00000001,00000000\x00", "32"},
		{"HOME=/root\x00", ""},
	} {
		if got := bannedCPUs(strings.Split(tc.env, "\x00")).String(); got != tc.want {
			t.Errorf("bannedCPUs(%q) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

// Only a process running the host's irqbalance binary counts: pid 500 is
// named irqbalance but runs a tenant's binary (a renamed copy, or its
// image's own /usr/sbin/irqbalance), and must not be blamed for drift.
func TestIRQBalances(t *testing.T) {
	root := testroot.Files(t, map[string]string{
		"proc/1/comm":           "systemd\n",
		"proc/1/stat":           "",
		"proc/412/comm":         "irqbalance\n",
		"proc/412/stat":         "",
		"proc/412/environ":      "PATH=/bin\x00IRQBALANCE_BANNED_CPULIST=2-3\x00",
		"proc/500/comm":         "irqbalance\n",
		"proc/500/stat":         "",
		"proc/500/environ":      "IRQBALANCE_BANNED_CPULIST=0-1\x00",
		"usr/sbin/irqbalance":   "the host's binary",
		"tenant/bin/irqbalance": "a tenant's binary",
	})
	for pid, exe := range map[string]string{"412": "usr/sbin/irqbalance", "500": "tenant/bin/irqbalance"} {
		if err := os.Symlink(root.Path(exe), root.Proc(pid, "exe")); err != nil {
			t.Fatal(err)
		}
	}
	got := IRQBalances(root)
	if len(got) != 1 || got[0].PID != 412 || got[0].Banned.String() != "2-3" {
		t.Fatalf("IRQBalances = %+v, want pid 412 banning 2-3", got)
	}
}
