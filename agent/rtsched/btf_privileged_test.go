//go:build privileged

package rtsched

import (
	"bufio"
	"compress/gzip"
	"os"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
)

// The running kernel's BTF says CONFIG_RT_GROUP_SCHED exactly when its own
// configuration does (/proc/config.gz, where the kernel carries it: this
// machine's does, Debian's do not).
func TestRealBTFTellsRTGroupScheduling(t *testing.T) {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		t.Skipf("no /proc/config.gz to check the BTF against: %v", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	want := false
	for sc := bufio.NewScanner(z); sc.Scan(); {
		if strings.TrimSpace(sc.Text()) == "CONFIG_RT_GROUP_SCHED=y" {
			want = true
		}
	}
	got, err := rtGroupSchedBuilt(testroot.RealKernel(t))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("BTF says CONFIG_RT_GROUP_SCHED %v, /proc/config.gz %v", got, want)
	}
}
