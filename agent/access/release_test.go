package access

import "testing"

func TestSameValue(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"1", "1", true},
		{" 4  5\n", "4 5", true},
		{"0-3", "0,1,2,3", true},
		{"0-3", "0-2", false},
		{"isolated", "isolated invalid (Cpu list in cpuset.cpus not exclusive)", true},
		{"isolated", "root", false},
		{"-1", "1", false},
		{"", "0", false},
		{"fifo", "other", false},
	} {
		if got := SameValue(tc.a, tc.b); got != tc.want {
			t.Errorf("SameValue(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
