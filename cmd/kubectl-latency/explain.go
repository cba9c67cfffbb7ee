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
	explainOwners(out, st.Settings)

	if k := st.Kernel; k != nil {
		section(out, "Kernel")
		fmt.Fprintf(out, "  %s, scheduler %s, cgroup %s (%s driver), online CPUs %s\n",
			safe(orDash(k.Version)), safe(orDash(string(k.SchedulerClass))), safe(orDash(string(k.CgroupMode))), safe(orDash(string(k.CgroupDriver))), safe(orDash(k.OnlineCPUs)))
		if c := schedulingClass(k); c != "" {
			fmt.Fprintf(out, "  scheduling class %s\n", safe(c))
		}
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

// explainOwners prints, for each other writer that owns settings of the
// profile (state OwnedBy), which settings the agent left to it and what to
// configure there instead (the first setting's message says it).
func explainOwners(out io.Writer, settings []v1alpha1.SettingResult) {
	var names []string
	byOwner := map[string][]v1alpha1.SettingResult{}
	for _, s := range settings {
		if s.State != v1alpha1.SettingOwnedBy {
			continue
		}
		o := orDash(s.Owner)
		if _, ok := byOwner[o]; !ok {
			names = append(names, o)
		}
		byOwner[o] = append(byOwner[o], s)
	}
	if len(names) == 0 {
		return
	}
	section(out, "Owned by other writers (the agent does not write or re-assert these; configure them there)")
	for _, o := range names {
		ss := byOwner[o]
		ids := make([]string, 0, 4)
		for i, s := range ss {
			if i == 4 {
				ids = append(ids, fmt.Sprintf("and %d more", len(ss)-4))
				break
			}
			ids = append(ids, s.Setting)
		}
		fmt.Fprintf(out, "  %s: %d setting(s): %s\n", safe(o), settingsCount(ss), safe(strings.Join(ids, ", ")))
		fmt.Fprintf(out, "    %s\n", safe(orDash(ss[0].Message)))
	}
}

// settingsCount is how many settings results stand for (Count for
// summarised lines).
func settingsCount(rs []v1alpha1.SettingResult) int {
	n := 0
	for _, r := range rs {
		n += max(int(r.Count), 1)
	}
	return n
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

// schedulingClass is the class the node's normal tasks run in, with what
// the agent read of sched_ext: "fair (sched_ext is not built into ...)",
// "ext: scx_lavd (enabled, every normal task, enable_seq 4)". "" from an
// agent that does not report it.
func schedulingClass(k *v1alpha1.KernelFacts) string {
	x := k.SchedExt
	if k.ActiveClass == "" || x == nil {
		return k.ActiveClass
	}
	if k.ActiveClass != "ext" {
		if x.Note != "" {
			return k.ActiveClass + " (" + x.Note + ")"
		}
		return k.ActiveClass
	}
	var notes []string
	if x.State != "" {
		notes = append(notes, x.State)
	}
	if x.State == "enabled" {
		if x.Partial {
			notes = append(notes, "partial: SCHED_EXT tasks only")
		} else {
			notes = append(notes, "every normal task")
		}
	}
	if x.EnableSeq != nil {
		notes = append(notes, fmt.Sprintf("enable_seq %d", *x.EnableSeq))
	}
	if x.Note != "" {
		notes = append(notes, x.Note)
	}
	return fmt.Sprintf("ext: %s (%s)", orDash(x.Ops), strings.Join(notes, ", "))
}
