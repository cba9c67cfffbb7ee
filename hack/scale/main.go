// Command scale runs the fleet simulator (hack/scale/fleetsim) at several
// fleet sizes against the real kube-apiserver and the real manager binary,
// writes docs/scale.md and its plot, and prints one line flagging each of
// issue 14's goals PASS or FAIL. `make bench-scale` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"latencytier.io/latencytier/internal/testassets"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"latencytier.io/latencytier/hack/scale/fleetsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	// envtest and the agents log through controller-runtime; the progress
	// lines and the manager's own log (manager.log) are what a run reads.
	ctrllog.SetLogger(logr.Discard())
	// The revision measured, read before the run writes its own report
	// and plot, which would mark every run after the first -dirty.
	rev := gitRev()
	o := fleetsim.Options{Progress: os.Stderr}
	sizes := flag.String("nodes", "1000,1000,3000,5000", "fleet sizes to run, comma-separated, in this order")
	heartbeats := flag.String("heartbeat", "interval,5m,5m,5m", "each run's agent --status-heartbeat, comma-separated, one per -nodes entry (or one for all): a duration, or `interval` for the old reporting (a status write per measurement window)")
	out := flag.String("out", "docs/scale.md", "report to write (the SVG plot goes beside it)")
	flag.StringVar(&o.ManagerBinary, "manager", "bin/latencytier", "latencytier binary to run as `manager` (empty: in process, CPU/RSS unmeasured)")
	cpuProfile := flag.String("cpuprofile", "", "write the simulator's own CPU profile (the agents) to this file")
	pprofAddr := flag.String("pprof-bind-address", "", "serve the simulator's own /debug/pprof here (127.0.0.1 only), to profile one phase")
	flag.StringVar(&o.APIServerProfile, "apiserver-cpuprofile", "", "prefix of the API server's CPU profiles over the first 15 s of the create and of the spec change (<prefix>-N-create.pprof, -change.pprof)")
	managerArgs := flag.String("manager-args", "", "extra manager flags, space-separated (e.g. --pprof-bind-address=127.0.0.1:6060)")
	flag.StringVar(&o.Assets, "assets", testassets.Default(), "envtest binaries (etcd, kube-apiserver)")
	flag.StringVar(&o.CRDDir, "crds", "config/crd/bases", "CRD directory")
	flag.DurationVar(&o.Interval, "interval", 30*time.Second, "measurement interval: every agent reports this often")
	flag.DurationVar(&o.Resync, "resync", 30*time.Second, "agent resync (drift re-check)")
	flag.DurationVar(&o.Settle, "settle", 15*time.Second, "wait before each measured window")
	flag.DurationVar(&o.Steady, "steady", 8*time.Minute, "steady-state window (agents measuring); longer than the longest stretched heartbeat (1.5 at 5m), so every node's heartbeat writes are counted")
	flag.DurationVar(&o.Quiet, "quiet", time.Minute, "quiet window (measurement Disabled, nothing changing)")
	flag.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "longest wait for every node to report (a 5000-node create took 2m45s-4m48s on 2 CPUs)")
	groupNice := flag.Int("autogroup-nice", -15, "run in a session of its own whose scheduler autogroup has this nice (0: leave the scheduling as it is); needs root")
	drift := flag.Float64("drift", 0, "percent of nodes whose autogroup someone keeps rewriting")
	fail := flag.Float64("fail", 0, "percent of nodes that fail a setting")
	regress := flag.Float64("regress", 0, "percent of nodes whose p99 goes up 5x after the spec change")
	vanish := flag.Float64("vanish", 0, "percent of nodes deleted after the steady window")
	flag.Parse()
	o.ManagerArgs = strings.Fields(*managerArgs)
	sched := ownAutogroup(*groupNice)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *pprofAddr != "" {
		ln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return err
		}
		go func() { _ = http.Serve(ln, nil) }() // net/http/pprof registers on the default mux
	}
	if o.ManagerBinary != "" {
		if _, err := os.Stat(o.ManagerBinary); err != nil {
			return fmt.Errorf("manager binary: %w (make build)", err)
		}
	}
	runs := strings.Split(*sizes, ",")
	hbs := strings.Split(*heartbeats, ",")
	if len(hbs) != 1 && len(hbs) != len(runs) {
		return fmt.Errorf("-heartbeat has %d entries for %d -nodes entries", len(hbs), len(runs))
	}
	var results []fleetsim.Result
	for i, s := range runs {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad -nodes entry %q", s)
		}
		o.Nodes = n
		hb := strings.TrimSpace(hbs[min(i, len(hbs)-1)])
		if hb == "interval" {
			o.Heartbeat = o.Interval
		} else if o.Heartbeat, err = time.ParseDuration(hb); err != nil || o.Heartbeat <= 0 {
			return fmt.Errorf("bad -heartbeat entry %q: a positive duration or \"interval\"", hb)
		}
		pct := func(p float64) int { return int(float64(n) * p / 100) }
		o.Drift, o.Fail, o.Regress, o.Vanish = pct(*drift), pct(*fail), pct(*regress), pct(*vanish)
		res, err := fleetsim.Run(ctx, o)
		if err != nil {
			return fmt.Errorf("fleet of %d nodes: %w", n, err)
		}
		results = append(results, res)
		if err := write(*out, results, o, rev, sched, os.Args[1:]); err != nil {
			return err
		}
		if res.Incomplete != "" {
			fmt.Fprintf(os.Stderr, "scale: N=%d did not complete; the runs after it skipped\n", n)
			break
		}
	}
	_, summary := fleetsim.Report(results, "")
	fmt.Println(summary)
	return nil
}

// write renders the report and the plot beside it.
func write(out string, results []fleetsim.Result, o fleetsim.Options, rev, sched string, args []string) error {
	svg := strings.TrimSuffix(filepath.Base(out), filepath.Ext(out)) + ".svg"
	if err := os.WriteFile(filepath.Join(filepath.Dir(out), svg), []byte(fleetsim.SVG(results)), 0o644); err != nil {
		return err
	}
	table, summary := fleetsim.Report(results, svg)
	var b strings.Builder
	fmt.Fprintf(&b, header, time.Now().UTC().Format("2006-01-02 15:04 UTC"), rev, machine()+", "+sched,
		strings.Join(args, " "), o.Interval, o.Steady, o.Quiet)
	b.WriteString(table)
	fmt.Fprintf(&b, "\nSummary (the line `make bench-scale` prints):\n\n    %s\n", summary)
	b.WriteString(method)
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

func gitRev() string {
	b, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// ownAutogroup moves the run (and the etcd, API server and manager it
// starts, which inherit it) into a session of its own and sets that
// session's scheduler autogroup to nice, and says what the scheduling was.
// With kernel.sched_autogroup_enabled every session shares the CPUs
// equally whatever its processes' nice, so on a shared machine the API
// server under test would get a 1/N share next to N-1 other busy
// sessions: requests then time out at 60 s with the API server at a
// third of a core (a 1000-node create stuck at 693 nodes after 5 min, here,
// beside two emulated VMs and two builds). The load at the start is
// recorded too, as the report's context.
func ownAutogroup(nice int) string {
	load := "load unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			load = "load " + f[0] + " at the start"
		}
	}
	if nice == 0 {
		return load
	}
	if b, err := os.ReadFile("/proc/sys/kernel/sched_autogroup_enabled"); err != nil || strings.TrimSpace(string(b)) != "1" {
		return load + ", autogroup scheduling off"
	}
	if _, err := syscall.Setsid(); err != nil {
		fmt.Fprintf(os.Stderr, "scale: no session of its own (%v); its autogroup is the caller's\n", err)
	}
	if err := os.WriteFile("/proc/self/autogroup", []byte(strconv.Itoa(nice)), 0); err != nil {
		fmt.Fprintf(os.Stderr, "scale: autogroup nice %d not set: %v\n", nice, err)
		return load + ", autogroup nice unchanged"
	}
	return fmt.Sprintf("%s, run in its own autogroup at nice %d", load, nice)
}

// machine is the CPU count and memory the run had.
func machine() string {
	mem := "unknown memory"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				mem = fmt.Sprintf("%.0f GiB", kb/(1<<20))
			}
		}
	}
	return fmt.Sprintf("%d CPUs, %s", runtime.NumCPU(), mem)
}

const header = `# Fleet scale

Generated by ` + "`make bench-scale`" + ` (hack/scale and hack/scale/fleetsim) on %s at %s,
%s; arguments: ` + "`%s`" + `. Do not edit by hand.

Each run (a fleet size and the agents' reporting) runs the real etcd and kube-apiserver (envtest binaries), the real manager
(` + "`bin/latencytier manager`" + `, a subprocess, so its CPU and RSS are its own) and N simulated
nodes in one process: a Node object and the real agent loop (agent/loop) against a temp-dir host
root (no kernel writes), watching only its own LatencyNode and measuring with the real Measurer
(schedstat source) every %s. The API server, the manager and every agent share the machine.
The old reporting is a heartbeat equal to the measurement interval: every agent writes its
status once per window, as before issue 30. The new one writes when something a reader acts
on changed and otherwise once per heartbeat, which each node stretches by 2-50%% (a share
fixed by its name), so a fleet that applied together does not write every heartbeat at once.

Columns: time from creating the profile until every node reported Applied at its generation;
the same after a spec change; the API server's CPU (cores) over the steady window; the agents'
status writes per node per hour in it; the manager's CPU (cores) and highest RSS over the steady window
(%s, agents reporting; it starts one measurement interval after the create, once every node's
first window has been judged and the manager has made no write for 10 s); API requests per minute by the manager and by all agents, profile status
writes per minute, in the steady window; how long after one node's agent fell silent (at the
start of the steady window; its Node stays Ready) the profile showed it Stale; the manager's writes in
the quiet window (%s, measurement Disabled, nothing changing: the goal is zero). The quiet window
starts once the manager has written the change (its profile status) and then made no
write for 10 s; the figure in brackets is when its last write of the change came, in seconds
after the change; Event series updates in the window are shown apart (below).

`

const method = `
## How it is measured

- Requests are the API server's own counts: apiserver_request_total has no user or user-agent
  label, so the manager and the agents authenticate as two users (groups fleetsim:manager,
  fleetsim:agents) and FlowSchemas per group and kind of request (profile status writes, other
  writes, everything else) make API Priority and Fairness count them in
  apiserver_flowcontrol_dispatched_requests_total{flow_schema}. The schemas use the exempt
  priority level, so APF never queues them: the figures are what our code asks for. A watch
  counts once, when it starts; informers list through the watch (client-go's WatchList).
- Manager CPU is utime+stime from /proc/<pid>/stat over the window; RSS is VmRSS sampled
  every second.
- The agents report when their Measurer's window ends; windows start when each agent first
  applied, so a fleet that applied together measures together; with the new reporting only
  the heartbeats (each node's own, 2-50% over the interval) spread apart, cycle by cycle.
- The progress lines (not the table) split the manager's writes of the create and of the
  change by resource (Node labels, LatencyNodes, Events, profile status), from FlowSchemas
  per resource as below.
- API server CPU is utime+stime of the kube-apiserver process over the steady window.
- Event series: the manager records Events through client-go's events/v1 broadcaster, which
  folds a repeated event (same object, reason and action; the message is not compared) into a
  series: it creates the Event, patches it at the second occurrence, counts the rest in
  memory, and patches the final count 6-12 min after the series' last occurrence
  (finishSeries; every series again each 30 min). Those patches of Events made before a
  window can fall into it; a FlowSchema for Event patches counts them, and the quiet window
  shows them apart from the manager's writes (Event creates stay in them).
- Stale: the silenced node counts as shown when the profile's status.nodes lists it Stale; the
  goal is within three of the heartbeats the agents report (status.heartbeatInterval). It is
  restarted afterwards, so the spec change reaches every node.
- Goals: the 1000-node ones (create and change under 20 s, stale within three heartbeats) on the
  largest new-reporting run of at most 1000 nodes; the 3000-node ones (create and change under
  30 s, manager under 0.2 core and 300 MiB) on the largest of at least 3000; status writes at
  most 12 per node per hour on every new-reporting run; the API server's steady CPU of the old
  reporting at least five times the new's at one size; the profile status coalesced and no
  manager write in the quiet window on every run.
`
