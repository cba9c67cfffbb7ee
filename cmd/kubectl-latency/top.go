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
	o := newOutput(true)
	cmd := command("top", "Nodes by run-queue p99, highest first", cobra.NoArgs, out, connect, o, nil,
		func(ctx context.Context, c client.Client, out io.Writer, _ []string) error {
			var nodes v1alpha1.LatencyNodeList
			if err := c.List(ctx, &nodes); err != nil {
				return err
			}
			lines := rank(nodes.Items, class)
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
			return top(out, lines, class, o.isWide())
		},
		func() error { return validateClass(class) })
	cmd.Flags().StringVar(&class, "class", "Node", "CPU class to rank by: Node (every CPU), Isolated or Reserved")
	_ = cmd.RegisterFlagCompletionFunc("class", completeWords(classes...))
	return cmd
}

func validateClass(class string) error {
	if !slices.Contains(classes, class) {
		return fmt.Errorf("--class must be Node, Isolated or Reserved, not %q", class)
	}
	return nil
}

// topLine is a node and its latency in the class top ranks by (nil: none
// measured).
type topLine struct {
	node  *v1alpha1.LatencyNode
	class *v1alpha1.ClassLatency
}

// rank orders the nodes with a measurement of the class highest p99
// first, then the nodes without one, by name.
func rank(nodes []v1alpha1.LatencyNode, class string) []topLine {
	type line = topLine
	lines := make([]line, len(nodes))
	for i := range nodes {
		lines[i].node = &nodes[i]
		if l := nodes[i].Status.Latency; l != nil {
			for j := range l.Classes {
				if l.Classes[j].Class == class {
					lines[i].class = &l.Classes[j]
				}
			}
		}
	}
	key := func(l line) int64 {
		if l.class == nil {
			return -1
		}
		return p99(l.class.P99)
	}
	sort.SliceStable(lines, func(i, j int) bool {
		if ki, kj := key(lines[i]), key(lines[j]); ki != kj {
			return ki > kj
		}
		return lines[i].node.Name < lines[j].node.Name
	})
	return lines
}

// top prints one line per node in rank's order; wide adds where the
// latest window came from, its length and the node's CPU pressure.
func top(out io.Writer, lines []topLine, class string, wide bool) error {
	t := newTable(out)
	t.row(wideCells(wide, []string{"NODE", "PROFILE", "CLASS", "P50", "P99", "P99.9", "MAX", "SAMPLES", "THROTTLED", "BUDGET"},
		"SOURCE", "WINDOW", "PSI-SOME10")...)
	for _, l := range lines {
		n := l.node
		c := l.class
		samples := "-"
		if c == nil {
			c = &v1alpha1.ClassLatency{Class: class}
		} else {
			samples = fmt.Sprint(c.Samples)
		}
		source, window, psi := "-", "-", "-"
		if lat := n.Status.Latency; lat != nil {
			source, window, psi = orDash(string(lat.Source)), dur(lat.Window), orDash(lat.PSICPUSomeAvg10)
		}
		t.row(wideCells(wide, []string{n.Name, orDash(n.Spec.Profile), class, dur(c.P50), dur(c.P99), dur(c.P999), dur(c.Max),
			samples, orDash(n.Status.ThrottledRatio), budget(n)}, source, window, psi)...)
	}
	if err := t.flush(); err != nil {
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
