package snapshot

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func TestParseCPUs(t *testing.T) {
	for _, c := range []struct {
		name               string
		spec               *v1alpha1.CPUSpec
		reserved, isolated string
		err                string
	}{
		{"none", nil, "", "", ""},
		{"both", &v1alpha1.CPUSpec{Reserved: ptr.To("0-1"), Isolated: ptr.To("2-3")}, "0-1", "2-3", ""},
		{"bad reserved", &v1alpha1.CPUSpec{Reserved: ptr.To("x"), Isolated: ptr.To("2")}, "", "2", "cpus.reserved"},
		{"bad isolated", &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("2-")}, "0", "", "cpus.isolated"},
	} {
		got := ParseCPUs(c.spec)
		if got.Reserved.String() != c.reserved || got.Isolated.String() != c.isolated {
			t.Errorf("%s: reserved %q isolated %q, want %q %q", c.name, got.Reserved, got.Isolated, c.reserved, c.isolated)
		}
		if (c.err == "") != (got.Err == nil) || (got.Err != nil && !strings.Contains(got.Err.Error(), c.err)) {
			t.Errorf("%s: error %v, want one naming %q", c.name, got.Err, c.err)
		}
	}
}

func TestReadAndArgs(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/cmdline": "ro isolcpus=managed_irq,2-3 nohz_full=2-3 -- idle=poll\n"})
	n := Read(root, v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Isolated: ptr.To("2-3")}})
	if n.CmdlineErr != nil || n.CPUs.Isolated.String() != "2-3" {
		t.Fatalf("read %+v", n)
	}
	if got := strings.Join(n.Isolation(), " "); got != "isolcpus=managed_irq,2-3 nohz_full=2-3" {
		t.Errorf("isolation %q", got)
	}
	if n.HasArg("idle=poll") || !n.HasArg("ro") {
		t.Errorf("HasArg: idle=poll after -- belongs to init; ro is the kernel's")
	}
	if m := n.For(v1alpha1.TuningSpec{}); !m.CPUs.Isolated.IsEmpty() || m.Cmdline != n.Cmdline {
		t.Errorf("For kept the CPUs or dropped the command line: %+v", m)
	}
	if missing := Read(testroot.New(t, nil), v1alpha1.TuningSpec{}); missing.CmdlineErr == nil {
		t.Errorf("no /proc/cmdline: no error")
	}
}
