package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// newExplainCommand is "kubectl latency explain NODE".
func newExplainCommand(out io.Writer, connect connectFunc) *cobra.Command {
	o := newOutput(false)
	cmd := command("explain NODE", "One node: findings, budget, what the profile changed and what the kernel reports",
		cobra.ExactArgs(1), out, connect, o, completeNodes(connect),
		func(ctx context.Context, c client.WithWatch, out io.Writer, args []string) error {
			if !o.table() {
				return printNode(ctx, c, out, o, args[0])
			}
			return explainNode(ctx, c, out, args)
		})
	cmd.Long = cmd.Short + ".\n\n" +
		"explain shows one named node as sections, not as a table of rows, so kubectl get's list flags mean " +
		"nothing here: no --no-headers, -l, -w or --sort-by. For several nodes, kubectl latency top and boot " +
		"take them (top -w re-prints a node's row as it changes)."
	return cmd
}

// explainNode prints the LatencyNode named by args[0].
func explainNode(ctx context.Context, c client.Client, out io.Writer, args []string) error {
	var n v1alpha1.LatencyNode
	if err := c.Get(ctx, client.ObjectKey{Name: args[0]}, &n); err != nil {
		return err
	}
	// The node's verdict is in its profile's status; a node without a
	// profile (or one already gone) has none.
	var vs verdicts
	if n.Spec.Profile != "" {
		var p v1alpha1.LatencyProfile
		err := c.Get(ctx, client.ObjectKey{Name: n.Spec.Profile}, &p)
		switch {
		case err == nil:
			vs = verdictsOf(&p)
		case !apierrors.IsNotFound(err):
			return err
		}
	}
	return explain(out, &n, vs)
}

// explain prints one LatencyNode section by section, most useful first,
// with its verdict from vs.
func explain(out io.Writer, n *v1alpha1.LatencyNode, vs verdicts) error {
	st := &n.Status
	fmt.Fprintf(out, "Node:     %s (%s)\n", n.Name, nodeState(n, vs))
	fmt.Fprintf(out, "Profile:  %s generation %d, action %s, revision %s\n",
		safe(orDash(n.Spec.Profile)), n.Spec.ProfileGeneration, n.Spec.Action, safe(orDash(n.Spec.Revision)))
	if st.ObservedGeneration != n.Generation {
		fmt.Fprintf(out, "          (the agent last acted on generation %d of %d)\n", st.ObservedGeneration, n.Generation)
	}

	section(out, "Findings")
	if len(st.Findings) == 0 {
		fmt.Fprintln(out, "  none")
	}
	for _, f := range st.Findings {
		fmt.Fprintf(out, "  %-8s %s: %s\n", safe(string(f.Severity)), safe(f.Type), safe(f.Message))
	}

	section(out, "Budget")
	b := n.Spec.Tuning.LatencyBudget
	if b == nil {
		fmt.Fprintln(out, "  none set by the profile")
	} else {
		ratio := "-"
		if b.ThrottledRatio != nil {
			ratio = *b.ThrottledRatio
		}
		fmt.Fprintf(out, "  run-queue p99 %s (measured %s), throttled ratio %s (measured %s)\n",
			dur(b.RunQueueP99), dur(st.RunQueueP99), ratio, orDash(st.ThrottledRatio))
	}

	if err := explainPodBudgets(out, n); err != nil {
		return err
	}

	section(out, "Conditions")
	t := newTable(out)
	for _, c := range st.Conditions {
		t.row("  "+c.Type, orDash(string(c.Status)), orDash(c.Reason), orDash(c.Message))
	}
	if err := t.flush(); err != nil {
		return err
	}

	section(out, "Latency")
	explainLatency(out, n, vs)

	section(out, "Settings (what the profile changed, what the kernel reports)")
	t = newTable(out)
	t.row("  SETTING", "DESIRED", "ACTUAL", "STATE", "MESSAGE")
	for _, s := range st.Settings {
		t.row("  "+s.Setting, orDash(s.Desired), orDash(s.Actual), orDash(string(s.State)), orDash(s.Message))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if st.SettingsOmitted > 0 {
		fmt.Fprintf(out, "  (+%d settings omitted from status)\n", st.SettingsOmitted)
	}

	if k := st.Kernel; k != nil {
		section(out, "Kernel")
		fmt.Fprintf(out, "  %s, scheduler %s, cgroup %s (%s driver), online CPUs %s\n",
			safe(orDash(k.Version)), safe(orDash(string(k.SchedulerClass))), safe(orDash(string(k.CgroupMode))), safe(orDash(string(k.CgroupDriver))), safe(orDash(k.OnlineCPUs)))
		if len(k.CmdlineIsolation) > 0 {
			fmt.Fprintf(out, "  command line: %s\n", safe(strings.Join(k.CmdlineIsolation, " ")))
		}
	}
	if b := bootSummary(st.Boot); b != "" {
		fmt.Fprintf(out, "  boot parameters: %s\n", safe(b))
	}

	if len(st.Throttling) > 0 {
		section(out, "Throttling")
		t = newTable(out)
		t.row("  POD", "OPTED-IN", "PERIODS", "THROTTLED", "RATIO", "THROTTLED-TIME")
		for _, p := range st.Throttling {
			t.row("  "+p.Namespace+"/"+p.Name, fmt.Sprint(p.OptedIn), fmt.Sprint(p.Periods), fmt.Sprint(p.Throttled),
				orDash(p.Ratio), dur(p.ThrottledTime))
		}
		return t.flush()
	}
	return nil
}

// explainLatency prints before/after, the verdict and the per-class numbers.
func explainLatency(out io.Writer, n *v1alpha1.LatencyNode, vs verdicts) {
	st := &n.Status
	for _, ev := range []struct {
		name string
		e    *v1alpha1.LatencyEvidence
	}{{"before", st.Baseline}, {"after", st.Current}} {
		if ev.e == nil {
			fmt.Fprintf(out, "  %-6s -\n", ev.name)
			continue
		}
		fmt.Fprintf(out, "  %-6s %s\n", ev.name, evidence(ev.e))
	}
	if v := vs.entry(n); v != nil {
		fmt.Fprintf(out, "  verdict %s: %s (revision %s)\n", safe(v.Verdict), safe(v.Message), safe(orDash(v.Revision)))
	} else if w := vs.verdict(n); w != "-" {
		fmt.Fprintf(out, "  verdict %s (Improved or Unchanged; the profile lists only the nodes that did not pass)\n", w)
	}
	if st.Latency == nil {
		return
	}
	fmt.Fprintf(out, "  latest window %s from %s", dur(st.Latency.Window), safe(orDash(string(st.Latency.Source))))
	if st.Latency.PSICPUSomeAvg10 != "" {
		fmt.Fprintf(out, ", CPU pressure some avg10 %s%%", safe(st.Latency.PSICPUSomeAvg10))
	}
	fmt.Fprintln(out)
	t := newTable(out)
	t.row("  CLASS", "P50", "P99", "P99.9", "MAX", "SAMPLES")
	for _, c := range st.Latency.Classes {
		t.row("  "+c.Class, dur(c.P50), dur(c.P99), dur(c.P999), dur(c.Max), fmt.Sprint(c.Samples))
	}
	_ = t.flush()
	if len(st.Latency.Pods) > 0 {
		fmt.Fprintln(out, "  who made the measured pods wait:")
		for i := range st.Latency.Pods {
			fmt.Fprintf(out, "    %s\n", podWait(&st.Latency.Pods[i]))
		}
	}
}

func section(out io.Writer, title string) { fmt.Fprintf(out, "\n%s:\n", title) }
