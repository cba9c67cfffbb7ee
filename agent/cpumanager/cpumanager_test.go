package cpumanager

import (
	"testing"

	"latencytier.io/latencytier/agent/host"
)

func TestRead(t *testing.T) {
	s, err := Read(host.New("testdata/static"))
	if err != nil {
		t.Fatal(err)
	}
	if s.PolicyName != PolicyStatic || !s.OwnsPlacement() || s.DefaultCPUSet.String() != "0,3-7" {
		t.Fatalf("static state = %+v", s)
	}
	if c, ok := s.PodCPUs("2c5a1d6f-0e8b-4c2f-9a11-1234567890bc"); !ok || c.String() != "4-5" {
		t.Errorf("PodCPUs = %s %v; want 4-5", c, ok)
	}
	if _, ok := s.PodCPUs("other"); ok {
		t.Error("a pod without entries has exclusive CPUs")
	}

	none, err := Read(host.New("testdata/none"))
	if err != nil || none.PolicyName != PolicyNone || none.OwnsPlacement() {
		t.Fatalf("none state = %+v %v", none, err)
	}
	missing, err := Read(host.New(t.TempDir()))
	if err != nil || missing != nil || missing.OwnsPlacement() {
		t.Fatalf("missing file = %+v %v; want nil, nil", missing, err)
	}
	for _, bad := range []string{`{`, `{"defaultCpuSet":""}`, `{"policyName":"static","defaultCpuSet":"x"}`,
		`{"policyName":"static","defaultCpuSet":"0","entries":{"u":{"c":"1-"}}}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) accepted", bad)
		}
	}
}
