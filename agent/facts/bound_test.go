package facts

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// bigHost is a 2x192-core SMT machine: 768 threads, 384 SMT groups, whose
// siblings are c and c+offset (offset 384: Intel numbering) or c and c+1
// (offset 1: AMD-style numbering), isolating every odd thread on the
// command line as a list no range can shorten.
func bigHost(t *testing.T, offset int) map[string]string {
	files := map[string]string{
		"proc/sys/kernel/osrelease":     "6.12.0-" + strings.Repeat("x", 200),
		"sys/devices/system/cpu/online": "0-767",
	}
	var odd []string
	for c := 0; c < 768; c++ {
		first := c - c%2
		if offset != 1 {
			first = c % offset
		}
		files[fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c)] = fmt.Sprintf("%d,%d", first, first+offset)
		if c%2 == 1 {
			odd = append(odd, fmt.Sprint(c))
		}
	}
	cpus := strings.Join(odd, ",")
	files["proc/cmdline"] = "ro isolcpus=managed_irq,domain," + cpus + " nohz_full=" + cpus + " rcu_nocbs=1-767"
	return files
}

// The facts of a big host fit the CRD once bounded, and say the same thing
// in fewer characters: every SMT group stays described.
func TestBoundBigHost(t *testing.T) {
	for _, tc := range []struct {
		offset int
		smt    []string
	}{
		{384, []string{"0-383+384"}},
		{1, nil}, // checked below: chunks of the even threads, "+1"
	} {
		t.Run(fmt.Sprintf("siblings+%d", tc.offset), func(t *testing.T) {
			full := Read(testroot.New(t, bigHost(t, tc.offset)), true, false)
			if len(full.SMTSiblings) != 384 {
				t.Fatalf("read %d SMT groups, want 384", len(full.SMTSiblings))
			}
			f := Bound(full)
			fits(t, f)
			if tc.smt != nil && !slices.Equal(f.SMTSiblings, tc.smt) {
				t.Errorf("smtSiblings = %q, want %q", f.SMTSiblings, tc.smt)
			}
			if tc.offset == 1 {
				var firsts []string
				for _, item := range f.SMTSiblings {
					list, ok := strings.CutSuffix(item, "+1")
					if !ok {
						t.Fatalf("item %q lacks the offset", item)
					}
					firsts = append(firsts, list)
				}
				if got := strings.Count(strings.Join(firsts, ","), ",") + 1; got != 384 {
					t.Errorf("summary names %d groups, want 384: %q", got, f.SMTSiblings)
				}
			}
			if f.CmdlineIsolation[2] != "rcu_nocbs=1-767" || !strings.HasPrefix(f.CmdlineIsolation[0], "isolcpus=managed_irq,domain,1,3,5,") ||
				!strings.HasSuffix(f.CmdlineIsolation[1], bound.Marker) {
				t.Errorf("cmdlineIsolation = %q", f.CmdlineIsolation)
			}
		})
	}
}

func fits(t *testing.T, f v1alpha1.KernelFacts) {
	t.Helper()
	check := func(what, s string, n int) {
		if c := utf8.RuneCountInString(s); c > n {
			t.Errorf("%s is %d characters, the CRD allows %d", what, c, n)
		}
	}
	check("version", f.Version, bound.Version)
	check("onlineCPUs", f.OnlineCPUs, bound.OnlineCPUs)
	if len(f.SMTSiblings) > bound.SMTGroups || len(f.CmdlineIsolation) > bound.CmdlineFlags {
		t.Errorf("%d SMT groups, %d cmdline flags", len(f.SMTSiblings), len(f.CmdlineIsolation))
	}
	for _, s := range f.SMTSiblings {
		check("smtSiblings item", s, bound.SMTGroup)
	}
	for _, s := range f.CmdlineIsolation {
		check("cmdlineIsolation item", s, bound.CmdlineFlag)
	}
}

// A host that fits keeps its facts as read; lists are only rewritten in
// range form.
func TestBoundSmallHost(t *testing.T) {
	f := v1alpha1.KernelFacts{Version: "6.1.0", OnlineCPUs: "0,1,2,3", SMTSiblings: []string{"0,2", "1,3"},
		CmdlineIsolation: []string{"isolcpus=managed_irq,2,3", "nohz_full=2-3", "rcu_nocbs=2,3"}}
	got := Bound(f)
	if got.OnlineCPUs != "0-3" || !slices.Equal(got.SMTSiblings, f.SMTSiblings) ||
		!slices.Equal(got.CmdlineIsolation, []string{"isolcpus=managed_irq,2-3", "nohz_full=2-3", "rcu_nocbs=2-3"}) {
		t.Errorf("Bound = %+v", got)
	}
}
