package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// status prints each profile (or the one named), then its nodes worst
// first, then under each node the settings that are not Applied.
func status(ctx context.Context, c client.Client, out io.Writer, args []string) error {
	var profiles []v1alpha1.LatencyProfile
	if len(args) == 1 {
		var p v1alpha1.LatencyProfile
		if err := c.Get(ctx, client.ObjectKey{Name: args[0]}, &p); err != nil {
			return err
		}
		profiles = append(profiles, p)
	} else {
		var list v1alpha1.LatencyProfileList
		if err := c.List(ctx, &list); err != nil {
			return err
		}
		profiles = list.Items
	}
	if len(profiles) == 0 {
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
	for i := range profiles {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := printProfile(out, &profiles[i], byProfile[profiles[i].Name]); err != nil {
			return err
		}
	}
	return nil
}

func printProfile(out io.Writer, p *v1alpha1.LatencyProfile, nodes []v1alpha1.LatencyNode) error {
	st := p.Status
	rollout := "-"
	if st.Rollout != nil && st.Rollout.Phase != "" {
		rollout = string(st.Rollout.Phase)
	}
	t := newTable(out)
	t.row("PROFILE", "READY", "MATCHED", "APPLIED", "DEGRADED", "OUTSIDE-BUDGET", "WORST-P99", "THROTTLED", "ROLLOUT")
	t.row(p.Name, condition(st.Conditions, v1alpha1.ProfileReady), itoa(st.Matched), itoa(st.Applied),
		itoa(st.Degraded), itoa(st.OutsideBudget), dur(st.WorstRunQueueP99), orDash(st.MaxThrottledRatio), rollout)
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
	worstFirst(nodes)
	t = newTable(out)
	t.row("  NODE", "STATE", "BEFORE-P99", "AFTER-P99", "CHANGE", "VERDICT", "THROTTLED", "SETTINGS")
	for i := range nodes {
		n := &nodes[i]
		t.row("  "+n.Name, nodeState(n), dur(before(n)), dur(after(n)), change(n), verdict(n),
			orDash(n.Status.ThrottledRatio), settingsSummary(n))
		for _, s := range n.Status.Settings {
			if s.State == v1alpha1.SettingApplied || s.State == v1alpha1.SettingReverted {
				continue
			}
			t.row("    "+s.Setting, string(s.State), "want "+orDash(s.Desired), "have "+orDash(s.Actual), "", "", "", s.Message)
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
