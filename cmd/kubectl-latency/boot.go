package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// newBootCommand is "kubectl latency boot [PROFILE]": the boot-parameter
// plan per node (issue 26), read before anything reboots. Each node its
// agent computed the arguments for from its own CPUs; the table says which
// the running kernel lacks, what the bootloader holds (State), and where
// a managed reboot stands; under each node, every argument with why.
func newBootCommand(out io.Writer, connect connectFunc) *cobra.Command {
	var f listFlags
	o := newOutput(false)
	cmd := command("boot [PROFILE]", "Boot parameters per node: the plan (which arguments, why), what is staged and booted, reboots in progress",
		cobra.MaximumNArgs(1), out, connect, o, completeProfiles(connect),
		func(ctx context.Context, c client.WithWatch, out io.Writer, args []string) error {
			src := clusterNodes{c: c, sel: f.sel}
			show := func(n *v1alpha1.LatencyNode) bool { return showsBoot(n, args) }
			if f.watch {
				return follow(ctx, src, bootView(out, o, &f, show))
			}
			all, _, err := src.list(ctx)
			if err != nil {
				return err
			}
			nodes := bootNodes(all, show, f.sortBy)
			if !o.table() {
				objs := make([]runtime.Object, len(nodes))
				for i := range nodes {
					objs[i] = nodes[i]
				}
				l, err := list(objs...)
				if err != nil {
					return err
				}
				return o.printObject(out, l)
			}
			if len(nodes) == 0 {
				_, err := fmt.Fprintln(out, "No node reports boot parameters.")
				return err
			}
			return bootTable(&aligned{out: out}, nodes, f.noHeaders)
		}, f.validateSelector, func() error { return bootColumns.validateSortBy(f.sortBy) })
	f.addNoHeaders(cmd)
	f.addSelector(cmd, "LatencyNodes")
	f.addWatch(cmd)
	f.addSortBy(cmd, bootColumns.keys())
	return cmd
}

// bootView is boot -w: the table as boot prints it, then a node's rows
// (its row and its arguments') again when they change.
func bootView(out io.Writer, o *output, f *listFlags, show func(*v1alpha1.LatencyNode) bool) nodeView {
	if !o.table() {
		return &objectView{out: out, o: o, show: show}
	}
	a := &aligned{out: out}
	return &tableView{
		a: a,
		print: func(all []v1alpha1.LatencyNode) error {
			return bootTable(a, bootNodes(all, show, f.sortBy), f.noHeaders)
		},
		render: func(n *v1alpha1.LatencyNode) [][]string {
			if !show(n) {
				return nil
			}
			return bootRows(n)
		},
	}
}

// showsBoot says whether boot shows n: a node (of the profile named, if
// one is) whose agent reports boot parameters or whose tuning asks for
// them.
func showsBoot(n *v1alpha1.LatencyNode, args []string) bool {
	if len(args) == 1 && n.Spec.Profile != args[0] {
		return false
	}
	return n.Status.Boot != nil || n.Spec.Tuning.BootParameters != nil
}

// bootNodes are the nodes boot shows, by name, or by the --sort-by column
// (ties by name).
func bootNodes(all []v1alpha1.LatencyNode, show func(*v1alpha1.LatencyNode) bool, sortBy string) []*v1alpha1.LatencyNode {
	var out []*v1alpha1.LatencyNode
	for i := range all {
		if show(&all[i]) {
			out = append(out, &all[i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	bootColumns.sortBy(out, sortBy)
	return out
}

// bootOf is n's boot status, empty when its agent reports none.
func bootOf(n *v1alpha1.LatencyNode) *v1alpha1.BootStatus {
	if n.Status.Boot == nil {
		return &v1alpha1.BootStatus{}
	}
	return n.Status.Boot
}

// missing counts the plan's arguments the running kernel lacks.
func missing(b *v1alpha1.BootStatus) int {
	k := 0
	for _, a := range b.Arguments {
		if !a.Present {
			k++
		}
	}
	return k
}

// bootColumns are boot's columns, one row per node; MISSING sorts by the
// number of arguments missing.
var bootColumns = columns[*v1alpha1.LatencyNode]{
	{header: "NODE", cell: func(n *v1alpha1.LatencyNode) string { return n.Name }},
	{header: "PROFILE", cell: func(n *v1alpha1.LatencyNode) string { return orDash(n.Spec.Profile) }},
	{header: "POLICY", cell: func(n *v1alpha1.LatencyNode) string {
		if bp := n.Spec.Tuning.BootParameters; bp != nil {
			return orDash(string(bp.Policy))
		}
		return "-"
	}},
	{header: "BACKEND", cell: func(n *v1alpha1.LatencyNode) string { return orDash(bootOf(n).Backend) }},
	{header: "STATE", cell: func(n *v1alpha1.LatencyNode) string { return orDash(string(bootOf(n).State)) }},
	{header: "MISSING", cell: func(n *v1alpha1.LatencyNode) string {
		b := bootOf(n)
		return fmt.Sprintf("%d/%d", missing(b), len(b.Arguments))
	}, number: func(n *v1alpha1.LatencyNode) (float64, bool) { return float64(missing(bootOf(n))), true }},
	{header: "REBOOT", cell: func(n *v1alpha1.LatencyNode) string {
		if r := n.Spec.Reboot; r != nil {
			return string(r.Phase)
		}
		return "-"
	}},
	{header: "MESSAGE", cell: func(n *v1alpha1.LatencyNode) string { return orDash(bootOf(n).Message) }},
}

// bootRows are a node's row, then one row per argument of its plan.
func bootRows(n *v1alpha1.LatencyNode) [][]string {
	rows := [][]string{bootColumns.cells(n, false)}
	for _, a := range bootOf(n).Arguments {
		have := "missing"
		if a.Present {
			have = "present"
		}
		rows = append(rows, []string{"  " + a.Argument, have, orDash(a.Why), "", "", "", "", ""})
	}
	return rows
}

// bootTable prints one row per node, then its plan's arguments.
func bootTable(a *aligned, nodes []*v1alpha1.LatencyNode, noHeaders bool) error {
	var rows [][]string
	if !noHeaders {
		rows = append(rows, bootColumns.headers(false))
	}
	for _, n := range nodes {
		rows = append(rows, bootRows(n)...)
	}
	return a.print(rows...)
}

// bootSummary is one node's boot state for explain: "Staged (GRUB), 2 of
// 4 arguments missing: nohz_full=2-3 rcu_nocbs=2-3", "" without a plan.
func bootSummary(b *v1alpha1.BootStatus) string {
	if b == nil {
		return ""
	}
	var missing []string
	for _, a := range b.Arguments {
		if !a.Present {
			missing = append(missing, a.Argument)
		}
	}
	s := string(b.State)
	if b.Backend != "" {
		s += " (" + b.Backend + ")"
	}
	if len(missing) > 0 {
		s += fmt.Sprintf(", %d of %d arguments missing: %s", len(missing), len(b.Arguments), strings.Join(missing, " "))
	}
	if b.Message != "" {
		s += "; " + b.Message
	}
	return s
}
