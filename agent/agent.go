// Package agent is the latencytier node agent's command line: the
// long-running agent (agent/loop) and the one-shot subcommands an SRE or a
// benchmark uses on a single host: plan (dry run), apply, revert and measure. The
// one-shot apply journals exactly like the loop, so a later revert (by the
// CLI or by the agent) restores the same originals.
package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/utils/clock"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/loop"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/agent/metrics"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
	"latencytier.io/latencytier/internal/metricsauth"
)

const usage = `Usage:
  latencytier agent --node-name N [--host-root /] [--kubeconfig FILE] [--resync 30s] [--status-heartbeat 5m] [--metrics-bind-address :9849] [--health-probe-bind-address 127.0.0.1:9850] [--allowed-sysctls-file F]
  latencytier agent plan --node-spec FILE [--host-root /] [--allowed-sysctls-file F]     print what would change; writes nothing
  latencytier agent apply --node-spec FILE [--host-root /] [--allowed-sysctls-file F]    apply once (journaled)
  latencytier agent revert [--host-root /]                    restore every journaled original
  latencytier agent measure [--duration 10s] [--json] ...     measure run-queue latency here, runqlat-style
The node-spec FILE is a LatencyNode YAML or just its spec. Raw sysctls
outside the built-in allowlist (docs/knobs.md) are applied only when the
--allowed-sysctls-file (the cluster admin's ConfigMap latencytier-sysctls,
key allowedSysctls) lists them.
`

// allowedSysctlsUsage documents --allowed-sysctls-file.
const allowedSysctlsUsage = "the cluster admin's sysctl unlock (key allowedSysctls of ConfigMap latencytier-sysctls, mounted); missing or empty: the built-in allowlist only"

// healthProbeUsage documents --health-probe-bind-address.
const healthProbeUsage = "address of the plain-HTTP liveness (/healthz) and readiness (/readyz) probes (0 disables them). The agent runs on the host network: keep it on loopback, where the kubelet probes it (httpGet host: 127.0.0.1); any other address exposes the probes on the node's network"

// crashHook is set by the crash-safety test in its child process only.
var crashHook func(stage apply.Stage, id string)

// Main runs "latencytier agent [plan|apply|revert|measure] ...".
func Main(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "plan":
			return oneShot("plan", args[1:], os.Stdout)
		case "apply":
			return oneShot("apply", args[1:], os.Stdout)
		case "revert":
			return oneShot("revert", args[1:], os.Stdout)
		case "measure":
			return measureCommand(ctx, args[1:], os.Stdout)
		case "help", "-h", "--help":
			fmt.Print(usage)
			return nil
		}
	}
	return runLoop(ctx, args)
}

func runLoop(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	var o loop.Options
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (the LatencyNode to watch)")
	hostRoot := fs.String("host-root", "/", "the host's filesystem root (/host in the DaemonSet)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (in-cluster config when empty)")
	fs.DurationVar(&o.Resync, "resync", loop.DefaultResync, "how often to re-check the host for drift")
	fs.DurationVar(&o.Heartbeat, "status-heartbeat", loop.DefaultHeartbeat, "the longest the agent leaves its LatencyNode status "+
		"unwritten when nothing a reader acts on changed (it writes at once when a setting, condition, finding, the rollout "+
		"evidence or a figure's bucket changes; readers show a node silent for two heartbeats as Stale); <= 0 means the default")
	fs.StringVar(&o.AllowedSysctlsFile, "allowed-sysctls-file", "", allowedSysctlsUsage)
	verbosity := fs.Int("v", 0, "log verbosity")
	noMeasure := fs.Bool("no-measure", false, "do not measure run-queue latency and throttling")
	metricsAddr := fs.String("metrics-bind-address", "0", "address of the Prometheus metrics endpoint (0 disables it; the DaemonSet sets :9849)")
	healthAddr := fs.String("health-probe-bind-address", "127.0.0.1:9850", healthProbeUsage)
	metricsSecure := fs.Bool("metrics-secure", true, "serve metrics over HTTPS to clients the API server authenticates and authorizes (get on /metrics); false serves plain HTTP to anyone")
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.NodeName == "" {
		return errors.New("agent: --node-name (or NODE_NAME) is required")
	}
	o.Root = host.New(*hostRoot)
	o.Log = newLogger(os.Stderr, *verbosity)
	// The probes answer before the journal is ours: live while waiting
	// for it, not ready until the first pass.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if *healthAddr != "0" {
		o.Health = loop.NewHealth(clock.RealClock{}, o.Resync)
		if _, err := o.Health.Serve(ctx, *healthAddr, o.Log); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	// The agent owns the journal while it runs, so a one-shot `agent
	// apply` on the node cannot change what it would undo on its next pass.
	release, err := journal.OwnWait(ctx, o.Root, journal.ModeAgent, time.Second, func(h *journal.HeldError) {
		o.Log.Info("Waiting for the journal: another process owns it", "owner", h.Owner.String())
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer release()
	o.Health.JournalOwned()
	if !*noMeasure {
		mlog := o.Log.WithName("measure")
		o.Meter = loop.NewMeter(measure.New(o.Root, mlog), clock.RealClock{}, mlog)
	}
	if *metricsAddr != "0" {
		c := metrics.New(o.Root)
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return fmt.Errorf("agent: register metrics: %w", err)
		}
		defer ctrlmetrics.Registry.Unregister(c)
		o.Observer, o.Metrics = c, metricsauth.ServerOptions(*metricsAddr, *metricsSecure)
	}
	return loop.Run(ctx, o)
}

func newLogger(w io.Writer, v int) logr.Logger {
	return funcr.NewJSON(func(obj string) { fmt.Fprintln(w, obj) }, funcr.Options{Verbosity: v, LogTimestamp: true})
}

func oneShot(cmd string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("agent "+cmd, flag.ContinueOnError)
	specFile := fs.String("node-spec", "", "LatencyNode YAML (or just its spec)")
	hostRoot := fs.String("host-root", "/", "the host's filesystem root")
	verbosity := fs.Int("v", 0, "log verbosity")
	allowedFile := fs.String("allowed-sysctls-file", "", allowedSysctlsUsage)
	if err := fs.Parse(args); err != nil {
		return err
	}
	admin, err := sysctl.ReadAdminList(*allowedFile)
	if err != nil {
		return fmt.Errorf("agent %s: %w", cmd, err)
	}
	root := host.New(*hostRoot)
	eng := &apply.Engine{Root: root, Log: newLogger(os.Stderr, *verbosity), Hook: crashHook}
	if cmd != "plan" {
		release, err := ownForCLI(root, cmd)
		if err != nil {
			return err
		}
		defer release()
	}
	if cmd == "revert" {
		return revert(eng, out)
	}
	if *specFile == "" {
		return fmt.Errorf("agent %s: --node-spec is required", cmd)
	}
	spec, err := loadSpecFile(*specFile)
	if err != nil {
		return err
	}
	if spec.Action == v1alpha1.ActionRevert {
		if cmd == "plan" {
			return previewRevert(root, out)
		}
		return revert(eng, out)
	}
	if cmd == "plan" {
		return preview(root, eng, spec, admin, out)
	}
	return applyOnce(eng, spec, admin, out)
}

// ownForCLI takes the journal for a one-shot apply or revert, refusing
// while another process (the DaemonSet agent) owns it: whatever the command
// changed, the agent would undo on its next pass, and the other way round.
func ownForCLI(root *host.Root, cmd string) (func(), error) {
	release, err := journal.Own(root, journal.ModeCLI)
	var held *journal.HeldError
	if errors.As(err, &held) {
		if held.Owner.Mode == journal.ModeAgent {
			return nil, fmt.Errorf("agent %s: refused: %w; it would undo this on its next pass: change the node's LatencyProfile instead, or stop the agent first", cmd, err)
		}
		return nil, fmt.Errorf("agent %s: refused: %w; wait for it to finish", cmd, err)
	}
	return release, err
}

func preview(root *host.Root, eng *apply.Engine, spec v1alpha1.LatencyNodeSpec, admin knobs.AdminList, out io.Writer) error {
	layout, _ := sysctl.Probe(root, false)
	st := desired.Render(root, layout, spec.Tuning, nil, admin)
	d, err := eng.Preview(st.Knobs)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if layout.DebugfsMissing {
		fmt.Fprintf(out, "note: debugfs is not mounted at %s; apply mounts it to reach the sched knobs\n", root.Sys("kernel", "debug"))
	}
	for _, o := range d.Orphans {
		fmt.Fprintf(out, "RESTORE      %-40s -> %q (no longer in the spec)\n", o.ID, o.Original)
	}
	for _, c := range d.Plan.Changes {
		fmt.Fprintf(out, "CHANGE       %-40s %q -> %q  (%s)\n", c.Knob.ID, c.From, c.Knob.Desired, c.Knob.Path)
	}
	printResults(out, d.Plan.Settled)
	printResults(out, st.Results)
	fmt.Fprintf(out, "%d change(s), %d restore(s); nothing was written\n", len(d.Plan.Changes), len(d.Orphans))
	return nil
}

func previewRevert(root *host.Root, out io.Writer) error {
	fmt.Fprintf(out, "the spec says Revert: `latencytier agent revert --host-root %s` restores the journal\n", root.Dir())
	return nil
}

func applyOnce(eng *apply.Engine, spec v1alpha1.LatencyNodeSpec, admin knobs.AdminList, out io.Writer) error {
	layout, perr := sysctl.Probe(eng.Root, true)
	if perr != nil {
		fmt.Fprintf(out, "note: %v\n", perr)
	}
	if layout.DebugfsMounted {
		fmt.Fprintf(out, "note: mounted debugfs at %s to reach the sched knobs\n", eng.Root.Sys("kernel", "debug"))
	}
	st := desired.Render(eng.Root, layout, spec.Tuning, nil, admin)
	rep, err := eng.Apply(apply.Meta{Profile: spec.Profile, Generation: spec.ProfileGeneration}, st.Knobs)
	printNotes(out, rep.Notes)
	printResults(out, rep.Restored)
	printResults(out, rep.Results)
	printResults(out, st.Results)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	fmt.Fprintf(out, "%d write(s); originals journaled in %s\n", rep.Written, eng.Root.StateDir())
	return nil
}

func revert(eng *apply.Engine, out io.Writer) error {
	rep, err := eng.Revert()
	printNotes(out, rep.Notes)
	printResults(out, rep.Results)
	if err != nil {
		return fmt.Errorf("revert: %w", err)
	}
	if c := rep.Conflicts(); len(c) > 0 {
		fmt.Fprintf(out, "%d restore(s); %d setting(s) left because someone else changed them\n", rep.Written, len(c))
		return nil
	}
	fmt.Fprintf(out, "%d restore(s); journal cleared\n", rep.Written)
	return nil
}

func printNotes(out io.Writer, notes []string) {
	for _, n := range notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
}

func printResults(out io.Writer, rs []v1alpha1.SettingResult) {
	for _, r := range rs {
		line := fmt.Sprintf("%-12s %-40s desired=%q actual=%q", r.State, r.Setting, r.Desired, r.Actual)
		if r.Message != "" {
			line += "  " + r.Message
		}
		fmt.Fprintln(out, line)
	}
}
