package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// classes are the CPU classes top ranks by.
var classes = []string{"Node", "Isolated", "Reserved"}

func newTopCommand(out io.Writer, connect connectFunc) *cobra.Command {
	var class string
	var f listFlags
	o := newOutput(true)
	cmd := command("top", "Nodes by run-queue p99, highest first", cobra.NoArgs, out, connect, o, nil,
		func(ctx context.Context, c client.WithWatch, out io.Writer, _ []string) error {
			src := clusterNodes{c: c, sel: f.sel}
			if f.watch {
				return follow(ctx, src, topView(out, o, class, &f))
			}
			nodes, _, err := src.list(ctx)
			if err != nil {
				return err
			}
			lines := rank(nodes, class)
			topColumns.sortBy(lines, f.sortBy)
			if !o.table() {
				objs := make([]runtime.Object, len(lines))
				for i := range lines {
					objs[i] = lines[i].node
				}
				l, err := list(objs...)
				if err != nil {
					return err
				}
				return o.printObject(out, l)
			}
			return top(out, &aligned{out: out}, lines, o.isWide(), f.noHeaders)
		},
		func() error { return validateClass(class) }, f.validateSelector,
		func() error { return topColumns.validateSortBy(f.sortBy) })
	cmd.Flags().StringVar(&class, "class", "Node", "CPU class to rank by: Node (every CPU), Isolated or Reserved")
	_ = cmd.RegisterFlagCompletionFunc("class", completeWords(classes...))
	f.addNoHeaders(cmd)
	f.addSelector(cmd, "LatencyNodes")
	f.addWatch(cmd)
	f.addSortBy(cmd, topColumns.keys())
	return cmd
}

// topView is top -w: the table as top prints it, then a node's row again
// when it changes (the measured pods' lines only under the first table:
// explain NODE shows them for one node).
func topView(out io.Writer, o *output, class string, f *listFlags) nodeView {
	if !o.table() {
		return &objectView{out: out, o: o, show: func(*v1alpha1.LatencyNode) bool { return true }}
	}
	a := &aligned{out: out}
	return &tableView{
		a: a,
		print: func(nodes []v1alpha1.LatencyNode) error {
			lines := rank(nodes, class)
			topColumns.sortBy(lines, f.sortBy)
			return top(out, a, lines, o.isWide(), f.noHeaders)
		},
		render: func(n *v1alpha1.LatencyNode) [][]string {
			return [][]string{topColumns.cells(lineOf(n, class), o.isWide())}
		},
	}
}

func validateClass(class string) error {
	if !slices.Contains(classes, class) {
		return fmt.Errorf("--class must be Node, Isolated or Reserved, not %q", class)
	}
	return nil
}

// topLine is a node and its latency in the class top ranks by (measured
// nil: none measured).
type topLine struct {
	node     *v1alpha1.LatencyNode
	class    string
	measured *v1alpha1.ClassLatency
}

// lat is the line's class latency, empty when none was measured.
func (l topLine) lat() *v1alpha1.ClassLatency {
	if l.measured == nil {
		return &v1alpha1.ClassLatency{Class: l.class}
	}
	return l.measured
}

// lineOf is n's line for class.
func lineOf(n *v1alpha1.LatencyNode, class string) topLine {
	l := topLine{node: n, class: class}
	if lat := n.Status.Latency; lat != nil {
		for j := range lat.Classes {
			if lat.Classes[j].Class == class {
				l.measured = &lat.Classes[j]
			}
		}
	}
	return l
}

// rank orders the nodes with a measurement of the class highest p99
// first, then the nodes without one, by name.
func rank(nodes []v1alpha1.LatencyNode, class string) []topLine {
	lines := make([]topLine, len(nodes))
	for i := range nodes {
		lines[i] = lineOf(&nodes[i], class)
	}
	key := func(l topLine) int64 {
		if l.measured == nil {
			return -1
		}
		return p99(l.measured.P99)
	}
	sort.SliceStable(lines, func(i, j int) bool {
		if ki, kj := key(lines[i]), key(lines[j]); ki != kj {
			return ki > kj
		}
		return lines[i].node.Name < lines[j].node.Name
	})
	return lines
}

// topColumns are top's columns; -o wide adds where the latest window came
// from, its length and the node's CPU pressure.
var topColumns = columns[topLine]{
	{header: "NODE", cell: func(l topLine) string { return l.node.Name }},
	{header: "PROFILE", cell: func(l topLine) string { return orDash(l.node.Spec.Profile) }},
	{header: "CLASS", cell: func(l topLine) string { return l.class }},
	{header: "P50", cell: func(l topLine) string { return dur(l.lat().P50) },
		number: func(l topLine) (float64, bool) { return durNumber(l.lat().P50) }},
	{header: "P99", cell: func(l topLine) string { return dur(l.lat().P99) },
		number: func(l topLine) (float64, bool) { return durNumber(l.lat().P99) }},
	{header: "P99.9", cell: func(l topLine) string { return dur(l.lat().P999) },
		number: func(l topLine) (float64, bool) { return durNumber(l.lat().P999) }},
	{header: "MAX", cell: func(l topLine) string { return dur(l.lat().Max) },
		number: func(l topLine) (float64, bool) { return durNumber(l.lat().Max) }},
	{header: "SAMPLES", cell: func(l topLine) string {
		if l.measured == nil {
			return "-"
		}
		return fmt.Sprint(l.measured.Samples)
	}, number: func(l topLine) (float64, bool) {
		if l.measured == nil {
			return 0, false
		}
		return float64(l.measured.Samples), true
	}},
	{header: "THROTTLED", cell: func(l topLine) string { return orDash(l.node.Status.ThrottledRatio) },
		number: func(l topLine) (float64, bool) { return ratioNumber(l.node.Status.ThrottledRatio) }},
	{header: "BUDGET", cell: func(l topLine) string { return budget(l.node) }},
	{header: "SOURCE", wide: true, cell: func(l topLine) string {
		if lat := l.node.Status.Latency; lat != nil {
			return orDash(string(lat.Source))
		}
		return "-"
	}},
	{header: "WINDOW", wide: true, cell: func(l topLine) string {
		if lat := l.node.Status.Latency; lat != nil {
			return dur(lat.Window)
		}
		return "-"
	}, number: func(l topLine) (float64, bool) {
		if lat := l.node.Status.Latency; lat != nil {
			return durNumber(lat.Window)
		}
		return 0, false
	}},
	{header: "PSI-SOME10", wide: true, cell: func(l topLine) string {
		if lat := l.node.Status.Latency; lat != nil {
			return orDash(lat.PSICPUSomeAvg10)
		}
		return "-"
	}, number: func(l topLine) (float64, bool) {
		if lat := l.node.Status.Latency; lat != nil {
			return ratioNumber(lat.PSICPUSomeAvg10)
		}
		return 0, false
	}},
}

// top prints one row per node in the lines' order (through a, so that
// rows -w prints later line up), then each node's measured pods.
func top(out io.Writer, a *aligned, lines []topLine, wide, noHeaders bool) error {
	var rows [][]string
	if !noHeaders {
		rows = append(rows, topColumns.headers(wide))
	}
	for _, l := range lines {
		rows = append(rows, topColumns.cells(l, wide))
	}
	if err := a.print(rows...); err != nil {
		return err
	}
	// Each node's measured pods, in the same order: who made them wait.
	for _, l := range lines {
		if lat := l.node.Status.Latency; lat != nil {
			for i := range lat.Pods {
				fmt.Fprintf(out, "%s  %s\n", l.node.Name, podWait(&lat.Pods[i]))
			}
		}
	}
	return nil
}

// budget is the WithinBudget condition as a word.
func budget(n *v1alpha1.LatencyNode) string {
	switch condition(n.Status.Conditions, v1alpha1.NodeWithinBudget) {
	case "True":
		return "within"
	case "False":
		return "OUTSIDE"
	}
	return "-"
}
