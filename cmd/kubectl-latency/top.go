package main

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

func newTopCommand(out io.Writer, connect connectFunc) *cobra.Command {
	var class string
	cmd := command("top", "Nodes by run-queue p99, highest first", cobra.NoArgs, out, connect,
		func(ctx context.Context, c client.Client, out io.Writer, _ []string) error {
			var list v1alpha1.LatencyNodeList
			if err := c.List(ctx, &list); err != nil {
				return err
			}
			return top(out, list.Items, class)
		})
	cmd.Flags().StringVar(&class, "class", "Node", "CPU class to rank by: Node (every CPU), Isolated or Reserved")
	return cmd
}

// top prints one line per node with a measurement of the class, highest
// p99 first, then the nodes without one.
func top(out io.Writer, nodes []v1alpha1.LatencyNode, class string) error {
	switch class {
	case "Node", "Isolated", "Reserved":
	default:
		return fmt.Errorf("--class must be Node, Isolated or Reserved, not %q", class)
	}
	type line struct {
		node  *v1alpha1.LatencyNode
		class *v1alpha1.ClassLatency
	}
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
	t := newTable(out)
	t.row("NODE", "PROFILE", "CLASS", "P50", "P99", "P99.9", "MAX", "SAMPLES", "THROTTLED", "BUDGET")
	for _, l := range lines {
		n := l.node
		c := l.class
		if c == nil {
			c = &v1alpha1.ClassLatency{Class: class}
		}
		t.row(n.Name, orDash(n.Spec.Profile), class, dur(c.P50), dur(c.P99), dur(c.P999), dur(c.Max),
			fmt.Sprint(c.Samples), orDash(n.Status.ThrottledRatio), budget(n))
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
