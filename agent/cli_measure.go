package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/agent/window"
	"latencytier.io/latencytier/api/v1alpha1"
)

// measureFlags are the flags of "latencytier agent measure".
type measureFlags struct {
	duration                             time.Duration
	asJSON                               bool
	hostRoot, isolated, reserved, attach string
}

// newMeasureCommand is "latencytier agent measure": it measures for --duration and
// prints the run-queue latency histogram the way runqlat does (log2 usecs
// ranges, counts, stars) with percentiles per CPU class, then the findings;
// --json prints the Result instead.
func newMeasureCommand() *cobra.Command {
	var f measureFlags
	cmd := &cobra.Command{
		Use:   "measure [flags]",
		Short: "Measure run-queue latency on this host, runqlat-style, with throttling and findings",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMeasure(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long to measure")
	fs.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
	fs.StringVar(&f.hostRoot, "host-root", "/", "the host's filesystem root (/host in the DaemonSet)")
	fs.StringVar(&f.isolated, "isolated", "", "isolated CPUs (cpulist) for a per-class breakdown")
	fs.StringVar(&f.reserved, "reserved", "", "reserved CPUs (cpulist) for a per-class breakdown")
	fs.StringVar(&f.attach, "attach", "auto", "BPF attach type: auto, tp_btf, raw_tp, or none (schedstat fallback)")
	return cmd
}

func runMeasure(ctx context.Context, f measureFlags, stdout io.Writer) error {
	if f.attach == "auto" {
		f.attach = measure.AttachAuto
	}
	in := window.Input{Tuning: v1alpha1.TuningSpec{CPUs: cpuSpec(f.isolated, f.reserved)}}
	m := window.New(measure.New(host.New(f.hostRoot), logr.Discard(), measure.WithAttach(f.attach)))
	if err := m.Start(ctx); err != nil {
		return err
	}
	defer m.Close()
	if !f.asJSON {
		fmt.Fprintf(stdout, "Tracing run queue latency with %s for %s... Hit Ctrl-C to end early.\n", m.Source(), f.duration)
	}
	select {
	case <-ctx.Done():
	case <-time.After(f.duration):
	}
	res, err := m.Collect(context.WithoutCancel(ctx), in)
	if err != nil {
		return err
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printResult(stdout, res)
	return nil
}

func cpuSpec(isolated, reserved string) *v1alpha1.CPUSpec {
	if isolated == "" && reserved == "" {
		return nil
	}
	s := &v1alpha1.CPUSpec{}
	if isolated != "" {
		s.Isolated = &isolated
	}
	if reserved != "" {
		s.Reserved = &reserved
	}
	return s
}

// printResult prints each class's runqlat-shaped histogram and percentiles,
// the throttling and the findings.
func printResult(w io.Writer, res *measure.Result) {
	lat := res.Latency
	if lat == nil {
		fmt.Fprintln(w, "No run-queue latency measured.")
		lat = &v1alpha1.LatencyStatus{}
	}
	for _, c := range lat.Classes { // in status order: Node, Isolated, Reserved
		h, ok := res.Hists[c.Class]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "\nclass %s: %d samples\n", c.Class, h.Count())
		measure.PrintLog2(w, h.Log2(), "usecs")
		fmt.Fprintln(w, percentileLine(h))
	}
	if lat.PSICPUSomeAvg10 != "" {
		fmt.Fprintf(w, "\nPSI cpu some avg10: %s%%\n", lat.PSICPUSomeAvg10)
	}
	for _, t := range res.Throttling {
		fmt.Fprintf(w, "throttled %s/%s: %d of %d periods (ratio %s)\n", t.Namespace, t.Name, t.Throttled, t.Periods, t.Ratio)
	}
	for _, f := range res.Findings {
		fmt.Fprintf(w, "\n[%s] %s: %s\n", f.Severity, f.Type, f.Message)
	}
	fmt.Fprintf(w, "\n%s=%s (%s): %s\n", res.Budget.Type, res.Budget.Status, res.Budget.Reason, res.Budget.Message)
}

func percentileLine(h *measure.Hist) string {
	p := func(q float64) time.Duration { d, _ := h.Quantile(q); return d.Round(100 * time.Nanosecond) }
	return fmt.Sprintf("p50 %s  p99 %s  p99.9 %s  max %s", p(0.5), p(0.99), p(0.999), h.Max().Round(100*time.Nanosecond))
}
