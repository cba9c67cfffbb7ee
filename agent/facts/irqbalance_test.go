package facts

import (
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

func TestIRQBalances(t *testing.T) {
	root := testroot.Files(t, map[string]string{
		"proc/1/comm":      "systemd\n",
		"proc/1/stat":      "",
		"proc/412/comm":    "irqbalance\n",
		"proc/412/stat":    "",
		"proc/412/environ": "PATH=/bin\x00IRQBALANCE_BANNED_CPULIST=2-3\x00",
	})
	got := IRQBalances(root)
	if len(got) != 1 || got[0].PID != 412 || got[0].Banned.String() != "2-3" {
		t.Fatalf("IRQBalances = %+v, want pid 412 banning 2-3", got)
	}
}
