package cpulist

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

func TestMasks(t *testing.T) {
	cases := []struct {
		cpus string
		mask string
	}{
		{"0", "1"}, {"0-1", "3"}, {"1", "2"}, {"0-7", "ff"}, {"32", "1,00000000"}, {"0,33", "2,00000001"},
	}
	for _, tc := range cases {
		set, _ := cpuset.Parse(tc.cpus)
		if got := FormatMask(set); got != tc.mask {
			t.Errorf("FormatMask(%s) = %s, want %s", tc.cpus, got, tc.mask)
		}
		back, err := ParseMask(tc.mask)
		if err != nil || !back.Equals(set) {
			t.Errorf("ParseMask(%s) = %v, %v", tc.mask, back, err)
		}
	}
	if !MasksEqual("00000000,00000003", "3") {
		t.Error("padded mask must equal the short one")
	}
	if MasksEqual("zz", "zz") {
		t.Error("an unparsable mask must equal nothing")
	}
}

// A mask from an environment variable or a kernel file is bounded like a
// cpulist: one setting CPU 4,000,000 must not expand into a 4M-entry set.
func TestParseMaskBounded(t *testing.T) {
	huge := "1" + strings.Repeat("0", 1_000_000/4)
	if s, err := ParseMask(huge); err == nil {
		t.Fatalf("ParseMask of a mask setting CPU 1000000 = %d CPUs, want an error", s.Size())
	}
	top := "8" + strings.Repeat("0", MaxCPUs/4-1) // CPU 8191: the largest allowed
	if s, err := ParseMask(top); err != nil || s.String() != "8191" {
		t.Errorf("ParseMask(CPU 8191) = %q, %v", s.String(), err)
	}
}

func TestEqual(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"0-1", "0,1", true}, {"0-1\n", "0-1", true}, {"0-3,5", "0,1,2,3,5", true},
		{"0", "0-1", false}, {"", "", true}, {"", "0", false},
		{"junk", " junk ", true}, {"junk", "0", false},
	} {
		if got := Equal(tc.a, tc.b); got != tc.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
