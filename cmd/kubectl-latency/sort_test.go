package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// measuredNode is a LatencyNode with a Node-class p99 (none when p99 is
// 0), a throttled ratio and a profile.
func measuredNode(name string, p99 time.Duration, throttled, profile string) v1alpha1.LatencyNode {
	n := v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Spec.Profile = profile
	n.Status.ThrottledRatio = throttled
	if p99 > 0 {
		n.Status.Latency = &v1alpha1.LatencyStatus{Classes: []v1alpha1.ClassLatency{
			{Class: "Node", Samples: 100, P99: &metav1.Duration{Duration: p99}},
		}}
	}
	return n
}

func names(lines []topLine) string {
	var s []string
	for _, l := range lines {
		s = append(s, l.node.Name)
	}
	return strings.Join(s, " ")
}

func linesOf(nodes ...v1alpha1.LatencyNode) []topLine {
	lines := make([]topLine, len(nodes))
	for i := range nodes {
		lines[i] = lineOf(&nodes[i], "Node")
	}
	return lines
}

// TestSortByDurationIsNumeric: --sort-by=p99 orders 1.2ms, 500µs, 80µs
// (highest first), which their strings would not ("1.2ms" < "500µs" <
// "80µs"), and an unmeasured node last; ratios sort as numbers too.
func TestSortByDurationIsNumeric(t *testing.T) {
	lines := linesOf(
		measuredNode("fast", 80*time.Microsecond, "0.05", "a"),
		measuredNode("unmeasured", 0, "", "a"),
		measuredNode("slow", 1200*time.Microsecond, "0.2", "a"),
		measuredNode("mid", 500*time.Microsecond, "0.15", "a"),
	)
	topColumns.sortBy(lines, "p99")
	if got := names(lines); got != "slow mid fast unmeasured" {
		t.Errorf("--sort-by=p99: %s; want slow mid fast unmeasured", got)
	}
	topColumns.sortBy(lines, "THROTTLED") // keys are case-insensitive
	if got := names(lines); got != "slow mid fast unmeasured" {
		t.Errorf("--sort-by=throttled: %s; want 0.2 0.15 0.05 then none", got)
	}
}

// TestSortByTiesKeepTheCommandsOrder: rows equal in the sort column keep
// the order they came in (top's rank, boot's names); text sorts A to Z
// with "-" last.
func TestSortByTiesKeepTheCommandsOrder(t *testing.T) {
	lines := linesOf(
		measuredNode("c", 100*time.Microsecond, "", "gateway"),
		measuredNode("a", 100*time.Microsecond, "", ""),
		measuredNode("d", 300*time.Microsecond, "", "batch"),
		measuredNode("b", 100*time.Microsecond, "", "gateway"),
	)
	topColumns.sortBy(lines, "p99")
	if got := names(lines); got != "d c a b" {
		t.Errorf("--sort-by=p99: %s; want d, then the ties c a b as they came", got)
	}
	topColumns.sortBy(lines, "profile")
	if got := names(lines); got != "d c b a" {
		t.Errorf("--sort-by=profile: %s; want batch (d), gateway (c, b as they came), then - (a)", got)
	}
	topColumns.sortBy(lines, "")
	if got := names(lines); got != "d c b a" {
		t.Errorf("no --sort-by reordered the rows: %s", got)
	}
}

// TestSortByRejectsUnknownKeysListingValidOnes: a key that names no
// column fails, listing every column's key.
func TestSortByRejectsUnknownKeysListingValidOnes(t *testing.T) {
	err := topColumns.validateSortBy(".status.p99")
	want := `--sort-by ".status.p99": not a column; use one of node, profile, class, p50, p99, p99.9, max, samples, throttled, budget, source, window, psi-some10`
	if err == nil || err.Error() != want {
		t.Errorf("top: %v; want %s", err, want)
	}
	if err := bootColumns.validateSortBy("p99"); err == nil || !strings.Contains(err.Error(), "node, profile, policy, backend, state, missing, reboot, message") {
		t.Errorf("boot --sort-by=p99: %v", err)
	}
	for _, k := range []string{"", "p99", "P99.9", "psi-some10"} {
		if err := topColumns.validateSortBy(k); err != nil {
			t.Errorf("top --sort-by=%q: %v", k, err)
		}
	}
}

// TestBootSortByMissingCountsArguments: MISSING ("2/3") sorts by how many
// arguments are missing, not by the text.
func TestBootSortByMissingCountsArguments(t *testing.T) {
	withArgs := func(name string, present ...bool) v1alpha1.LatencyNode {
		n := v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		n.Status.Boot = &v1alpha1.BootStatus{}
		for _, p := range present {
			n.Status.Boot.Arguments = append(n.Status.Boot.Arguments, v1alpha1.BootArgument{Argument: "a", Present: p})
		}
		return n
	}
	all := []v1alpha1.LatencyNode{withArgs("one", false), withArgs("none"), withArgs("ten", false, false, false, false, false, false, false, false, false, false), withArgs("two", false, false, true)}
	got := bootNodes(all, func(*v1alpha1.LatencyNode) bool { return true }, "missing")
	var s []string
	for _, n := range got {
		s = append(s, n.Name)
	}
	if strings.Join(s, " ") != "ten two one none" {
		t.Errorf("boot --sort-by=missing: %v; want ten two one none", s)
	}
}

// TestNoHeaders: --no-headers leaves out the header lines of top, boot and
// status (both of status's tables), and only them.
func TestNoHeaders(t *testing.T) {
	n := measuredNode("w-1", 80*time.Microsecond, "", "gateway")
	n.Status.Boot = &v1alpha1.BootStatus{State: v1alpha1.BootStaged, Arguments: []v1alpha1.BootArgument{{Argument: "nohz_full=2-3"}}}
	for _, c := range []struct {
		what  string
		print func(out *bytes.Buffer, noHeaders bool) error
		rows  int // without headers
	}{
		{"top", func(out *bytes.Buffer, nh bool) error {
			return top(out, &aligned{out: out}, linesOf(n), false, nh)
		}, 1},
		{"top -o wide", func(out *bytes.Buffer, nh bool) error {
			return top(out, &aligned{out: out}, linesOf(n), true, nh)
		}, 1},
		{"boot", func(out *bytes.Buffer, nh bool) error {
			return bootTable(&aligned{out: out}, []*v1alpha1.LatencyNode{&n}, nh)
		}, 2},
		{"status", func(out *bytes.Buffer, nh bool) error {
			return printProfile(out, &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "gateway"}}, []v1alpha1.LatencyNode{n}, false, nh)
		}, 2},
	} {
		var with, without bytes.Buffer
		if err := c.print(&with, false); err != nil {
			t.Fatal(err)
		}
		if err := c.print(&without, true); err != nil {
			t.Fatal(err)
		}
		var headers int
		var body []string // the rows under the headers, their cells
		for _, l := range strings.Split(strings.TrimSuffix(with.String(), "\n"), "\n") {
			if strings.Contains(l, "NODE") || strings.Contains(l, "PROFILE") {
				headers++
				continue
			}
			body = append(body, strings.Join(strings.Fields(l), " "))
		}
		var rows []string
		for _, l := range strings.Split(strings.TrimSuffix(without.String(), "\n"), "\n") {
			rows = append(rows, strings.Join(strings.Fields(l), " "))
		}
		if headers == 0 || len(rows) != c.rows || strings.Join(rows, "\n") != strings.Join(body, "\n") {
			t.Errorf("%s --no-headers printed\n%s\nwant the rows of\n%s\nwithout its %d header line(s)", c.what, without.String(), with.String(), headers)
		}
	}
}

// TestAlignedLinesUpAsKubectlGet: aligned prints what newTable (the
// tabwriter kubectl get's printer uses) prints for the same rows, and a
// row printed later lines up under them.
func TestAlignedLinesUpAsKubectlGet(t *testing.T) {
	rows := [][]string{{"NODE", "P99", "BUDGET"}, {"worker-17", "1.2ms", "OUTSIDE"}, {"w-2", "80µs", ""}, {"  rcu_nocbs=2-3", "", "why"}}
	var want, got bytes.Buffer
	tw := newTable(&want)
	for _, r := range rows {
		tw.row(r...)
	}
	if err := tw.flush(); err != nil {
		t.Fatal(err)
	}
	a := &aligned{out: &got}
	if err := a.print(rows...); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("aligned printed\n%q\nnewTable\n%q", got.String(), want.String())
	}
	got.Reset()
	if err := a.print([]string{"w-3", "9ms", "within"}); err != nil {
		t.Fatal(err)
	}
	if want := "w-3              9ms    within\n"; got.String() != want {
		t.Errorf("a later row: %q, want %q (under the first rows' columns)", got.String(), want)
	}
}
