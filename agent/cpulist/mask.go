package cpulist

import (
	"fmt"
	"math/big"
	"strings"

	"k8s.io/utils/cpuset"
)

// Equal compares two cpulists by their CPUs: "0-1" equals "0,1" and "" is
// the empty set. Values that do not parse compare as trimmed strings.
func Equal(actual, want string) bool {
	a, errA := Parse(actual)
	w, errW := Parse(want)
	if errA != nil || errW != nil {
		return strings.TrimSpace(actual) == strings.TrimSpace(want)
	}
	return a.Equals(w)
}

// ParseMask parses a kernel CPU mask ("3", "00000000,000000ff"), refusing
// one that sets a CPU at or above MaxCPUs as Parse does.
func ParseMask(s string) (cpuset.CPUSet, error) {
	v, ok := new(big.Int).SetString(strings.ReplaceAll(strings.TrimSpace(s), ",", ""), 16)
	if !ok || v.Sign() < 0 {
		return cpuset.New(), fmt.Errorf("bad cpu mask %q", s)
	}
	if v.BitLen() > MaxCPUs {
		return cpuset.New(), fmt.Errorf("cpu mask sets CPU %d: CPUs are numbered below %d", v.BitLen()-1, MaxCPUs)
	}
	var cpus []int
	for i := 0; i < v.BitLen(); i++ {
		if v.Bit(i) == 1 {
			cpus = append(cpus, i)
		}
	}
	return cpuset.New(cpus...), nil
}

// MasksEqual compares two kernel CPU masks by their CPUs: "00000000,00000003"
// equals "3". A mask that does not parse equals nothing.
func MasksEqual(actual, want string) bool {
	a, err1 := ParseMask(actual)
	w, err2 := ParseMask(want)
	return err1 == nil && err2 == nil && a.Equals(w)
}

// FormatMask renders a CPU set as a kernel mask, 32-bit groups separated by
// commas the way the kernel prints it.
func FormatMask(s cpuset.CPUSet) string {
	v := new(big.Int)
	for _, c := range s.List() {
		v.SetBit(v, c, 1)
	}
	hex := v.Text(16)
	var groups []string
	for len(hex) > 8 {
		groups = append([]string{hex[len(hex)-8:]}, groups...)
		hex = hex[:len(hex)-8]
	}
	return strings.Join(append([]string{hex}, groups...), ",")
}
