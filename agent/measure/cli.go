package measure

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/api/v1alpha1"
)

// Command runs "latencytier agent measure": it measures for --duration and
// prints the run-queue latency histogram the way runqlat does (log2 usecs
// ranges, counts, stars) with percentiles per CPU class, then the findings;
// --json prints the Result instead.
func Command(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	fs.SetOutput(stdout)
	duration := fs.Duration("duration", 10*time.Second, "how long to measure")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	hostRoot := fs.String("host-root", "/", "the host's filesystem root (/host in the DaemonSet)")
	isolated := fs.String("isolated", "", "isolated CPUs (cpulist) for a per-class breakdown")
	reserved := fs.String("reserved", "", "reserved CPUs (cpulist) for a per-class breakdown")
	attach := fs.String("attach", "auto", "BPF attach type: auto, tp_btf, raw_tp, or none (schedstat fallback)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *attach == "auto" {
		*attach = AttachAuto
	}
	in := Input{Tuning: v1alpha1.TuningSpec{CPUs: cpuSpec(*isolated, *reserved)}}
	m := New(host.New(*hostRoot), logr.Discard(), WithAttach(*attach))
	if err := m.Start(ctx); err != nil {
		return err
	}
	defer m.Close()
	if !*asJSON {
		fmt.Fprintf(stdout, "Tracing run queue latency with %s for %s... Hit Ctrl-C to end early.\n", m.Source(), *duration)
	}
	select {
	case <-ctx.Done():
	case <-time.After(*duration):
	}
	res, err := m.Collect(context.WithoutCancel(ctx), in)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	PrintResult(stdout, res)
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

// PrintResult prints each class's runqlat-shaped histogram and percentiles,
// the throttling and the findings.
func PrintResult(w io.Writer, res *Result) {
	if res.Latency == nil {
		fmt.Fprintln(w, "No run-queue latency measured.")
	}
	for _, c := range classOrder {
		h, ok := res.Hists[c]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "\nclass %s: %d samples\n", c, h.Count())
		PrintLog2(w, h.Log2(), "usecs")
		fmt.Fprintln(w, percentileLine(h))
	}
	if res.Latency != nil && res.Latency.PSICPUSomeAvg10 != "" {
		fmt.Fprintf(w, "\nPSI cpu some avg10: %s%%\n", res.Latency.PSICPUSomeAvg10)
	}
	for _, t := range res.Throttling {
		fmt.Fprintf(w, "throttled %s/%s: %d of %d periods (ratio %s)\n", t.Namespace, t.Name, t.Throttled, t.Periods, t.Ratio)
	}
	for _, f := range res.Findings {
		fmt.Fprintf(w, "\n[%s] %s: %s\n", f.Severity, f.Type, f.Message)
	}
	fmt.Fprintf(w, "\n%s=%s (%s): %s\n", res.Budget.Type, res.Budget.Status, res.Budget.Reason, res.Budget.Message)
}

func percentileLine(h *Hist) string {
	p := func(q float64) time.Duration { d, _ := h.Quantile(q); return d.Round(100 * time.Nanosecond) }
	return fmt.Sprintf("p50 %s  p99 %s  p99.9 %s  max %s", p(0.5), p(0.99), p(0.999), h.Max().Round(100*time.Nanosecond))
}

// PrintLog2 prints a log2 histogram exactly as libbpf-tools' print_log2_hist.
func PrintLog2(w io.Writer, vals []uint64, unit string) {
	idxMax := -1
	var valMax uint64
	for i, v := range vals {
		if v > 0 {
			idxMax = i
		}
		valMax = max(valMax, v)
	}
	if idxMax < 0 {
		return
	}
	pad, width, stars := 5, 19, 40
	if idxMax > 32 {
		pad, width, stars = 15, 29, 20
	}
	fmt.Fprintf(w, "%*s%-*s : count    distribution\n", pad, "", width, unit)
	colw := 10
	if idxMax > 32 {
		colw = 20
	}
	for i := 0; i <= idxMax; i++ {
		low := (uint64(1) << (i + 1)) >> 1
		high := (uint64(1) << (i + 1)) - 1
		if low == high {
			low--
		}
		fmt.Fprintf(w, "%*d -> %-*d : %-8d |%s|\n", colw, low, colw, high, vals[i], starBar(vals[i], valMax, stars))
	}
}

func starBar(v, vmax uint64, width int) string {
	if vmax == 0 {
		return strings.Repeat(" ", width)
	}
	n := int(min(v, vmax) * uint64(width) / vmax)
	return strings.Repeat("*", n) + strings.Repeat(" ", width-n)
}
