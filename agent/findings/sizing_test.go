package findings

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
)

// The reserved set is checked against the node: none while CPUs are
// isolated, or fewer than max(NUMA nodes, ceil(online/16)), is a finding
// with the numbers.
func TestReservedTooSmall(t *testing.T) {
	r := func(a, b int) cpuset.CPUSet {
		var l []int
		for i := a; i <= b; i++ {
			l = append(l, i)
		}
		return cpuset.New(l...)
	}
	none := cpuset.New()
	twoNodes := map[int]cpuset.CPUSet{0: r(0, 31), 1: r(32, 63)}
	for _, c := range []struct {
		name                       string
		reserved, isolated, online cpuset.CPUSet
		numa                       map[int]cpuset.CPUSet
		want                       []string // nil: no finding
	}{
		{"small node, one reserved", cpuset.New(0), r(1, 3), r(0, 3), map[int]cpuset.CPUSet{0: r(0, 3)}, nil},
		{"nothing set", none, none, r(0, 63), twoNodes, nil},
		{"isolated without reserved", none, r(2, 63), r(0, 63), twoNodes,
			[]string{"CPUs 2-63 are isolated but no online CPU is reserved", "64 online CPUs", "at least 4 CPU(s)"}},
		{"reserved offline only", cpuset.New(70), r(2, 63), r(0, 63), twoNodes, []string{"no online CPU is reserved"}},
		{"64 CPUs, 2 reserved", cpuset.New(0, 32), r(1, 31).Union(r(33, 63)), r(0, 63), twoNodes,
			[]string{"2 reserved CPU(s) (0,32) for 64 online CPUs on 2 NUMA node(s)", "at least 4 here"}},
		{"64 CPUs, 4 reserved on one node", r(0, 3), r(4, 63), r(0, 63), twoNodes,
			[]string{"4 reserved CPU(s) (0-3) for 64 online CPUs on 2 NUMA node(s); NUMA node1 have none", "at least 4"}},
		{"64 CPUs, 4 across nodes", cpuset.New(0, 1, 32, 33), r(2, 31), r(0, 63), twoNodes, nil},
		{"no NUMA info, 17 CPUs", cpuset.New(0), r(1, 16), r(0, 16), nil, []string{"1 reserved CPU(s) (0) for 17 online CPUs", "at least 2"}},
	} {
		f := reservedTooSmall(c.reserved, c.isolated, c.online, c.numa)
		if c.want == nil {
			if f != nil {
				t.Errorf("%s: finding %+v, want none", c.name, f)
			}
			continue
		}
		if f == nil || f.Type != FindingReservedTooSmall {
			t.Errorf("%s: finding %+v, want %s", c.name, f, FindingReservedTooSmall)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(f.Message, w) {
				t.Errorf("%s: message %q lacks %q", c.name, f.Message, w)
			}
		}
	}
}
