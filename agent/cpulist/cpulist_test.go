package cpulist

import (
	"runtime"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/internal/testroot"
)

func TestParse(t *testing.T) {
	good := map[string]string{
		"":         "",
		" 0-3,8\n": "0-3,8",
		"0,2,4":    "0,2,4",
		"8191":     "8191",
		"0-8191":   "0-8191",
		"0-3,2-5":  "0-5",
		"4-4":      "4",
	}
	for in, want := range good {
		got, err := Parse(in)
		if err != nil || got.String() != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got.String(), err, want)
		}
	}
	bad := map[string]string{
		"0-5000000":            "out of range",
		"8192":                 "out of range",
		"99999999999999999999": "out of range",
		"0-8191,0-8191":        "more than 8192",
		"3-1":                  "ends before",
		"a":                    "not a CPU number",
		"1,,2":                 "not a CPU number",
		"-1":                   "not a CPU number",
		"1-":                   "not a CPU number",
	}
	for in, want := range bad {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) err = %v; want %q", in, err, want)
		}
	}
}

// TestHugeListRefusedWithoutExpanding: cpuset.Parse expands "0-5000000"
// into a map of five million CPUs; Parse must refuse it having allocated
// next to nothing.
func TestHugeListRefusedWithoutExpanding(t *testing.T) {
	const huge = "0-5000000"
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Parse(huge)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatalf("Parse(%q) accepted", huge)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Fatalf("Parse(%q) allocated %d bytes before refusing; want < 64 KiB", huge, grew)
	}
	t.Logf("refused %q: %v", huge, err)
}

func TestOnline(t *testing.T) {
	root := testroot.Lines(t, map[string]string{"sys/devices/system/cpu/online": "0-3,6"})
	got, err := Online(root)
	if err != nil || !got.Equals(cpuset.New(0, 1, 2, 3, 6)) {
		t.Fatalf("Online = %s, %v", got, err)
	}
	if _, err := Online(testroot.Lines(t, map[string]string{"sys/devices/system/cpu/online": "0-999999"})); err == nil {
		t.Fatal("Online accepted an out-of-range list")
	}
	if _, err := Online(testroot.Lines(t, nil)); err == nil {
		t.Fatal("Online without the file succeeded")
	}
}
