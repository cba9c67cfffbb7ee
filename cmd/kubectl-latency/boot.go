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
	o := newOutput(false)
	return command("boot [PROFILE]", "Boot parameters per node: the plan (which arguments, why), what is staged and booted, reboots in progress",
		cobra.MaximumNArgs(1), out, connect, o, completeProfiles(connect),
		func(ctx context.Context, c client.Client, out io.Writer, args []string) error {
			var all v1alpha1.LatencyNodeList
			if err := c.List(ctx, &all); err != nil {
				return err
			}
			nodes := bootNodes(all.Items, args)
			if !o.table() {
				objs := make([]runtime.Object, len(nodes))
				for i := range nodes {
					objs[i] = &nodes[i]
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
			return bootTable(out, nodes)
		})
}

// bootNodes are the nodes (of the profile named, if one is) whose agent
// reports boot parameters or whose tuning asks for them, by name.
func bootNodes(all []v1alpha1.LatencyNode, args []string) []v1alpha1.LatencyNode {
	var out []v1alpha1.LatencyNode
	for _, n := range all {
		if len(args) == 1 && n.Spec.Profile != args[0] {
			continue
		}
		if n.Status.Boot == nil && n.Spec.Tuning.BootParameters == nil {
			continue
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// bootTable prints one row per node, then its plan's arguments.
func bootTable(out io.Writer, nodes []v1alpha1.LatencyNode) error {
	t := newTable(out)
	t.row("NODE", "PROFILE", "POLICY", "BACKEND", "STATE", "MISSING", "REBOOT", "MESSAGE")
	for _, n := range nodes {
		b := n.Status.Boot
		if b == nil {
			b = &v1alpha1.BootStatus{}
		}
		policy := "-"
		if bp := n.Spec.Tuning.BootParameters; bp != nil {
			policy = orDash(string(bp.Policy))
		}
		missing := 0
		for _, a := range b.Arguments {
			if !a.Present {
				missing++
			}
		}
		reboot := "-"
		if r := n.Spec.Reboot; r != nil {
			reboot = string(r.Phase)
		}
		t.row(n.Name, orDash(n.Spec.Profile), policy, orDash(b.Backend), orDash(string(b.State)),
			fmt.Sprintf("%d/%d", missing, len(b.Arguments)), reboot, orDash(b.Message))
		for _, a := range b.Arguments {
			have := "missing"
			if a.Present {
				have = "present"
			}
			t.row("  "+a.Argument, have, orDash(a.Why), "", "", "", "", "")
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	return nil
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
