package knobs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every name on the built-in allowlist has a type and bounds; nothing else
// has any (an unlocked name is only length-bounded).
func TestEveryAllowedSysctlHasBounds(t *testing.T) {
	for _, r := range rules {
		switch {
		case r.Allowed && r.Value.Kind == "":
			t.Errorf("%s is allowlisted without a value type and bounds", r.Name)
		case !r.Allowed && r.Value != (Bounds{}):
			t.Errorf("%s has bounds but is not allowlisted: nothing would enforce them", r.Name)
		case r.Value.Kind == KindInteger && (r.Value.Min > r.Value.Max || r.Value.Min < 0 || len(strconv.FormatInt(r.Value.Max, 10)) > maxIntegerDigits):
			t.Errorf("%s: bounds %d..%d", r.Name, r.Value.Min, r.Value.Max)
		}
		if strings.ContainsAny(r.Value.describe(), "'\"`\\") {
			t.Errorf("%s: bounds text holds a quote or backslash (it goes into CEL)", r.Name)
		}
	}
	if _, ok := BoundsOf("vm.panic_on_oom"); ok {
		t.Error("an unlockable name has bounds")
	}
}

// The review's values: each allocates, spins or runs a softirq without
// end, and is refused now; the edges of each range are accepted.
func TestCheckValue(t *testing.T) {
	cases := []struct {
		name, value string
		ok          bool
	}{
		{"net.core.netdev_max_backlog", "1000", true},
		{"net.core.netdev_max_backlog", "100000000", false},
		{"net.core.rps_sock_flow_entries", "32768", true},
		{"net.core.rps_sock_flow_entries", "536870912", false},
		{"net.core.busy_poll", "0", true},
		{"net.core.busy_poll", "50", true},
		{"net.core.busy_poll", "2147483647", false},
		{"net.core.busy_read", "1000000", false},
		{"net.core.netdev_budget", "300", true},
		{"net.core.netdev_budget", "1000000", false},
		{"net.core.netdev_budget_usecs", "2000", true},
		{"net.core.netdev_budget_usecs", "0", false},
		{"net.core.dev_weight", "64", true},
		{"net.core.dev_weight", "0", false},
		{"net.core.dev_weight", "99999", false},
		{"vm.dirty_ratio", "10", true},
		{"vm.dirty_ratio", "0", false},
		{"vm.dirty_ratio", "100", false},
		{"vm.dirty_bytes", "1", false},
		{"vm.stat_interval", "0", false},
		{"vm.stat_interval", "1", true},
		{"vm.swappiness", "200", true},
		{"vm.swappiness", "201", false},
		{"vm.swappiness", "-1", false},
		{"vm.swappiness", "+10", false},
		{"vm.swappiness", " 10", false},
		{"vm.swappiness", "1e2", false},
		{"vm.swappiness", "99999999999999999999999", false},
		{"kernel.watchdog", "1", true},
		{"kernel.watchdog", "2", false},
		{"kernel.sched_rr_timeslice_ms", "0", false},
		{"kernel.watchdog_cpumask", "0", true},
		{"kernel.watchdog_cpumask", "0,2-4,8191", true},
		{"kernel.watchdog_cpumask", "4-2", false},
		{"kernel.watchdog_cpumask", "0-8192", false},
		{"kernel.watchdog_cpumask", "0,,1", false},
		{"kernel.watchdog_cpumask", "ff", false},
		{"vm.panic_on_oom", "anything at all", true}, // unlockable: only length-bounded
	}
	for _, tc := range cases {
		msg, ok := CheckValue(tc.name, tc.value)
		if ok != tc.ok {
			t.Errorf("CheckValue(%s, %q) = %v (%s), want %v", tc.name, tc.value, ok, msg, tc.ok)
			continue
		}
		if !ok && (!strings.Contains(msg, "sysctl "+tc.name) || !strings.Contains(msg, "must be")) {
			t.Errorf("CheckValue(%s, %q) message does not name the sysctl and the bounds: %q", tc.name, tc.value, msg)
		}
	}
	// Every integer range is closed at both ends, off by one on each side.
	for _, r := range rules {
		if !r.Allowed || r.Value.Kind != KindInteger {
			continue
		}
		for v, want := range map[int64]bool{r.Value.Min: true, r.Value.Max: true, r.Value.Min - 1: false, r.Value.Max + 1: false} {
			if v < 0 {
				continue
			}
			if _, ok := CheckValue(r.Name, strconv.FormatInt(v, 10)); ok != want {
				t.Errorf("CheckValue(%s, %d) = %v, want %v", r.Name, v, ok, want)
			}
		}
	}
}

// One table: a bound of an allowlisted sysctl is written down in the
// catalogue only. Anywhere else in the repository (code, manifests, docs,
// scripts) a line naming the sysctl with both of its bounds is a copy that
// will go stale. The generated files are checked against the catalogue by
// their own tests (the CRDs in api/v1alpha1, docs/knobs.md here).
func TestBoundsHaveNoCopies(t *testing.T) {
	root := filepath.Join("..", "..")
	out, err := exec.Command("git", "-C", root, "ls-files").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err) // a source tarball has no history to scan
	}
	generated := map[string]bool{
		"internal/knobs/knobs.go":      true, // the table
		"api/v1alpha1/tuning_types.go": true, // the CEL markers: TestSysctlRulesMatchTheCatalogue
		"docs/knobs.md":                true, // TestDocIsCurrent
		"config/crd/bases/tuning.latencytier.io_latencyprofiles.yaml":        true, // TestSysctlRulesMatchTheCatalogue
		"config/crd/bases/tuning.latencytier.io_latencynodes.yaml":           true,
		"charts/latencytier/crds/tuning.latencytier.io_latencyprofiles.yaml": true, // charts: a copy of config/crd
		"charts/latencytier/crds/tuning.latencytier.io_latencynodes.yaml":    true,
	}
	type bound struct {
		name   *regexp.Regexp
		lo, hi *regexp.Regexp
	}
	var bounds []bound
	for _, r := range rules {
		if !r.Allowed || r.Value.Kind != KindInteger || r.Value.Max <= 1 {
			continue // 0/1 switches: "0" and "1" are on every line
		}
		word := func(n int64) *regexp.Regexp {
			return regexp.MustCompile(`(^|[^0-9.])` + strconv.FormatInt(n, 10) + `([^0-9.]|$)`)
		}
		bounds = append(bounds, bound{regexp.MustCompile(regexp.QuoteMeta(r.Name) + `([^a-z_]|$)`), word(r.Value.Min), word(r.Value.Max)})
	}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if generated[f] || strings.HasSuffix(f, "_test.go") {
			continue
		}
		fh, err := os.Open(filepath.Join(root, f))
		if err != nil {
			continue // listed but deleted in the work tree
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for _, b := range bounds {
				if b.name.MatchString(line) && b.lo.MatchString(line) && b.hi.MatchString(line) {
					t.Errorf("%s:%d repeats the bounds of a sysctl the catalogue (internal/knobs) owns: %s", f, n, strings.TrimSpace(line))
				}
			}
		}
		fh.Close()
	}
}
