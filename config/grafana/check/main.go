// Command check runs every query of the latencytier Grafana dashboard
// against a Prometheus, with each template variable at "All", as range
// queries over the last -range, and fails unless each returns data. The
// e2e runs it against its real Prometheus (hack/e2e-prometheus.sh); it
// runs as well against any other:
//
//	go run ./config/grafana/check -prometheus http://127.0.0.1:9090
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"latencytier.io/latencytier/config/grafana"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the exit: 0 when every query returned data, 1 when
// one did not, 2 for bad flags or a dashboard that cannot be read.
func run(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(errOut)
	prom := fs.String("prometheus", "", "Prometheus base URL, e.g. http://127.0.0.1:9090 (required)")
	file := fs.String("dashboard", "config/grafana/latencytier.json", "the dashboard JSON")
	window := fs.Duration("range", time.Hour, "how far back each range query looks (Grafana's time range)")
	step := fs.Duration("step", 15*time.Second, "the range queries' resolution")
	rate := fs.String("rate-interval", "1m", "what $__rate_interval and $__interval stand for (at least 4 scrape intervals)")
	wait := fs.Duration("wait", 0, "keep querying this long until every query has data")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *prom == "" || fs.NArg() > 0 {
		fmt.Fprintln(errOut, "check: -prometheus URL is required and no arguments are taken")
		return 2
	}
	if *window <= 0 || *step <= 0 {
		fmt.Fprintln(errOut, "check: -range and -step must be positive")
		return 2
	}
	d, err := grafana.Load(*file)
	if err != nil {
		fmt.Fprintln(errOut, "check:", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c := grafana.Checker{URL: *prom, Window: *window, Step: *step, Client: &http.Client{Timeout: 30 * time.Second}}
	res, err := c.CheckAll(ctx, d, d.NewExpander(*rate, window.String()), *wait)
	if err != nil {
		fmt.Fprintln(errOut, "check:", err)
		return 2
	}
	failed := 0
	for _, r := range res {
		fmt.Fprintln(out, r)
		if !r.OK() {
			failed++
		}
	}
	if failed > 0 {
		fmt.Fprintf(out, "%d of %d dashboard queries returned no data\n", failed, len(res))
		return 1
	}
	fmt.Fprintf(out, "all %d dashboard queries returned data\n", len(res))
	return 0
}
