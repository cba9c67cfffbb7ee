package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// newStatusCommand is "kubectl latency status [PROFILE]".
func newStatusCommand(out io.Writer, connect connectFunc) *cobra.Command {
	var f listFlags
	o := newOutput(true)
	cmd := command("status [PROFILE]", "Profiles, their nodes (worst first, before/after p99) and the settings that do not hold",
		cobra.MaximumNArgs(1), out, connect, o, completeProfiles(connect),
		func(ctx context.Context, c client.WithWatch, out io.Writer, args []string) error {
			return status(ctx, c, out, o, &f, args)
		}, f.validateSelector)
	cmd.Long = cmd.Short + ".\n\n" +
		"-l selects LatencyProfiles by their labels (a PROFILE argument names one instead). " +
		"There is no -w and no --sort-by: status groups each profile's nodes under it, worst first, " +
		"an order that one row printed alone on a change, or a sort by one column, would lose; " +
		"kubectl latency top and boot take -w and --sort-by for nodes."
	f.addNoHeaders(cmd)
	f.addSelector(cmd, "LatencyProfiles")
	cmd.PreRunE = andThen(cmd.PreRunE, func(_ *cobra.Command, args []string) error {
		if len(args) == 1 && f.selector != "" {
			return fmt.Errorf("--selector %q: give a PROFILE or a selector, not both", f.selector)
		}
		return nil
	})
	return cmd
}

// status prints each profile (or the one named), then its nodes worst
// first, then under each node the settings that are not Applied; with -o
// json|yaml|..., a List of those profiles and their LatencyNodes.
func status(ctx context.Context, c client.Client, out io.Writer, o *output, f *listFlags, args []string) error {
	var profiles []v1alpha1.LatencyProfile
	if len(args) == 1 {
		var p v1alpha1.LatencyProfile
		if err := c.Get(ctx, client.ObjectKey{Name: args[0]}, &p); err != nil {
			return err
		}
		profiles = append(profiles, p)
	} else {
		var list v1alpha1.LatencyProfileList
		if err := c.List(ctx, &list, f.listOptions()...); err != nil {
			return err
		}
		profiles = list.Items
	}
	if len(profiles) == 0 && o.table() {
		_, err := fmt.Fprintln(out, "No LatencyProfiles found.")
		return err
	}
	var nodes v1alpha1.LatencyNodeList
	if err := c.List(ctx, &nodes); err != nil {
		return err
	}
	byProfile := map[string][]v1alpha1.LatencyNode{}
	for _, n := range nodes.Items {
		byProfile[n.Spec.Profile] = append(byProfile[n.Spec.Profile], n)
	}
	if !o.table() {
		return printProfiles(out, o, profiles, byProfile)
	}
	for i := range profiles {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := printProfile(out, &profiles[i], byProfile[profiles[i].Name], o.isWide(), f.noHeaders); err != nil {
			return err
		}
	}
	return nil
}

// printProfiles prints each profile followed by its nodes, worst first, as
// one List.
func printProfiles(out io.Writer, o *output, profiles []v1alpha1.LatencyProfile, byProfile map[string][]v1alpha1.LatencyNode) error {
	var objs []runtime.Object
	for i := range profiles {
		objs = append(objs, &profiles[i])
		nodes := byProfile[profiles[i].Name]
		worstFirst(nodes, verdictsOf(&profiles[i]))
		for j := range nodes {
			objs = append(objs, &nodes[j])
		}
	}
	l, err := list(objs...)
	if err != nil {
		return err
	}
	return o.printObject(out, l)
}

// printProfile prints a profile's table and its nodes'; wide adds the
// profile's conflicted and stale counts and each node's revision, its
// measured pods' p99 after the change and its scheduling class; noHeaders leaves out both header
// lines.
func printProfile(out io.Writer, p *v1alpha1.LatencyProfile, nodes []v1alpha1.LatencyNode, wide, noHeaders bool) error {
	st := p.Status
	rollout := "-"
	if st.Rollout != nil && st.Rollout.Phase != "" {
		rollout = string(st.Rollout.Phase)
	}
	t := newTable(out)
	t.header(noHeaders, wideCells(wide, []string{"PROFILE", "READY", "MATCHED", "APPLIED", "DEGRADED", "OUTSIDE-BUDGET", "WORST-P99", "THROTTLED", "ROLLOUT"},
		"CONFLICTED", "STALE")...)
	t.row(wideCells(wide, []string{p.Name, condition(st.Conditions, v1alpha1.ProfileReady), itoa(st.Matched), itoa(st.Applied),
		itoa(st.Degraded), itoa(st.OutsideBudget), dur(st.WorstRunQueueP99), orDash(st.MaxThrottledRatio), rollout},
		itoa(st.Conflicted), itoa(st.Stale))...)
	if err := t.flush(); err != nil {
		return err
	}
	if st.Rollout != nil && st.Rollout.Message != "" {
		fmt.Fprintf(out, "Rollout %s: %s\n", safe(st.Rollout.Revision), safe(st.Rollout.Message))
	}
	if len(nodes) == 0 {
		_, err := fmt.Fprintln(out, "  (no LatencyNodes)")
		return err
	}
	vs := verdictsOf(p)
	worstFirst(nodes, vs)
	t = newTable(out)
	t.header(noHeaders, wideCells(wide, []string{"  NODE", "STATE", "BEFORE-P99", "AFTER-P99", "CHANGE", "VERDICT", "THROTTLED", "SETTINGS"},
		"REVISION", "POD-P99", "CLASS")...)
	for i := range nodes {
		n := &nodes[i]
		t.row(wideCells(wide, []string{"  " + n.Name, nodeState(n, vs), dur(before(n)), dur(after(n)), change(n), vs.verdict(n),
			orDash(n.Status.ThrottledRatio), settingsSummary(n)}, orDash(n.Spec.Revision), podP99(n),
			v1alpha1.SummarizeNode(n.Status).Class)...)
		for _, s := range n.Status.Settings {
			if s.State == v1alpha1.SettingApplied || s.State == v1alpha1.SettingReverted {
				continue
			}
			t.row("    "+s.Setting, orDash(string(s.State)), "want "+orDash(s.Desired), "have "+orDash(s.Actual), "", "", "", orDash(s.Message))
		}
	}
	return t.flush()
}

// settingsSummary counts a node's settings by outcome ("5 Applied, 1 Failed"),
// each IRQ of a summarised line (count) as one.
func settingsSummary(n *v1alpha1.LatencyNode) string {
	counts := map[v1alpha1.SettingState]int{}
	var order []v1alpha1.SettingState
	for _, s := range n.Status.Settings {
		if counts[s.State] == 0 {
			order = append(order, s.State)
		}
		counts[s.State] += max(1, int(s.Count)) // a summarised IRQ line counts its IRQs
	}
	out := ""
	for _, st := range order {
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("%d %s", counts[st], st)
	}
	if n.Status.SettingsOmitted > 0 {
		out += fmt.Sprintf(" (+%d omitted)", n.Status.SettingsOmitted)
	}
	return orDash(out)
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// wideCells is cells, and with -o wide the extra ones after them.
func wideCells(wide bool, cells []string, extra ...string) []string {
	if wide {
		return append(cells, extra...)
	}
	return cells
}

// podP99 is the measured pods' run-queue p99 in the node's current
// evidence, "-" without one.
func podP99(n *v1alpha1.LatencyNode) string {
	if n.Status.Current == nil || n.Status.Current.Pods == nil {
		return "-"
	}
	return dur(n.Status.Current.Pods.P99)
}
