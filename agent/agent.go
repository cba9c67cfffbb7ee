// Package agent is the latencytier node agent's command line: the
// long-running agent (agent/loop) and the one-shot subcommands an SRE or a
// benchmark uses on a single host: plan (dry run), apply, revert and measure. The
// one-shot apply journals exactly like the loop, so a later revert (by the
// CLI or by the agent) restores the same originals.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/utils/clock"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cpumanager"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/loop"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/agent/metrics"
	"latencytier.io/latencytier/agent/nri"
	"latencytier.io/latencytier/agent/owners"
	"latencytier.io/latencytier/agent/plan"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	"latencytier.io/latencytier/agent/snapshot"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/cli"
	"latencytier.io/latencytier/internal/knobs"
	"latencytier.io/latencytier/internal/logging"
	"latencytier.io/latencytier/internal/metricsauth"
)

// long is "latencytier agent --help"'s description.
const long = `Run the node agent: watch this node's LatencyNode, apply its tuning
(originals journaled first), keep it from drifting, measure run-queue latency
and throttling, and report in the LatencyNode's status.

The subcommands work on this host alone, without the API server. A node-spec
FILE is a LatencyNode YAML, just its spec, or a LatencyProfile. Raw sysctls
outside the built-in allowlist (docs/knobs.md) are applied only when the
--allowed-sysctls-file (the cluster admin's ConfigMap latencytier-sysctls,
key allowedSysctls) lists them.`

// allowedSysctlsUsage documents --allowed-sysctls-file.
const allowedSysctlsUsage = "the cluster admin's sysctl unlock (key allowedSysctls of ConfigMap latencytier-sysctls, mounted); missing or empty: the built-in allowlist only"

// healthProbeUsage documents --health-probe-bind-address.
const healthProbeUsage = "address of the plain-HTTP liveness (/healthz) and readiness (/readyz) probes (0 disables them). The agent runs on the host network: keep it on loopback, where the kubelet probes it (httpGet host: 127.0.0.1); any other address exposes the probes on the node's network"

// nriSocketUsage documents --nri-socket.
const nriSocketUsage = "the container runtime's NRI socket, on the host (under --host-root): while it exists the agent is an NRI " +
	"plugin that creates granted containers without a CFS quota and on their CPUs (NRI mode; condition RuntimeHookConnected); " +
	"empty disables NRI mode. The file path tunes containers either way, one pass after they start"

// podSourceUsage documents --pod-source.
const podSourceUsage = "where the agent learns which pods run on its node: Runtime (from the container runtime through its NRI " +
	"plugin, --nri-socket; the runtime knows only this node's pods, so the agent's role grants nothing on pods) or APIServer " +
	"(an informer on the node's pods; needs list and watch on every pod: RBAC cannot confine them to a node). Chart value agent.podSource"

// crashHook is set by the crash-safety test in its child process only.
var crashHook func(stage apply.Stage, id string)

// Main runs "latencytier agent [plan|apply|revert|measure] ..." with args.
func Main(ctx context.Context, args []string) error {
	return cli.Run(ctx, cli.Setup(NewCommand()), args)
}

// NewCommand is "latencytier agent" and its subcommands.
func NewCommand() *cobra.Command {
	var f loopFlags
	cmd := &cobra.Command{
		Use:   "agent --node-name N [flags]",
		Short: "Run the node agent (and, as subcommands, its one-shot plan, apply, revert and measure)",
		Long:  long,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLoop(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	f.addFlags(cmd.Flags())
	cmd.AddCommand(
		oneShotCommand("plan", "Print what the agent would change on this host; writes nothing"),
		oneShotCommand("apply", "Apply a node spec once, journaling every original first"),
		oneShotCommand("revert", "Restore every journaled original"),
		newMeasureCommand(),
	)
	return cmd
}

// loopFlags are the long-running agent's flags.
type loopFlags struct {
	o             loop.Options
	hostRoot      string
	noMeasure     bool
	metricsAddr   string
	healthAddr    string
	metricsSecure bool
	metricsCert   string
	nriSocket     string
	podSource     string
	log           logging.Options
}

func (f *loopFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.o.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (the LatencyNode to watch; default $NODE_NAME)")
	fs.StringVar(&f.hostRoot, "host-root", "/", "the host's filesystem root (/host in the DaemonSet)")
	fs.StringVar(&f.o.Kubeconfig, "kubeconfig", "", "kubeconfig file (in-cluster config when empty)")
	fs.DurationVar(&f.o.Resync, "resync", loop.DefaultResync, "how often to re-check the host for drift")
	fs.DurationVar(&f.o.Heartbeat, "status-heartbeat", loop.DefaultHeartbeat, "the longest the agent leaves its LatencyNode status "+
		"unwritten when nothing a reader acts on changed (it writes at once when a setting, condition, finding, the rollout "+
		"evidence or a figure's bucket changes; readers show a node silent for two heartbeats as Stale); <= 0 means the default")
	fs.StringVar(&f.o.AllowedSysctlsFile, "allowed-sysctls-file", "", allowedSysctlsUsage)
	fs.StringVar(&f.o.Boot.SlotsFile, "reboot-slots-file", "", "the cluster admin's number of reboot slots (key slots of ConfigMap "+
		"latencytier-reboots, mounted); missing or empty: the agent reboots for no managed reboot")
	fs.StringVar(&f.o.Boot.SlotsNamespace, "namespace", os.Getenv("POD_NAMESPACE"), "the operator namespace, where the reboot slots "+
		"(Leases latencytier-reboot-slot-<i>) live (default $POD_NAMESPACE)")
	fs.BoolVar(&f.noMeasure, "no-measure", false, "do not measure run-queue latency and throttling")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "0", "address of the Prometheus metrics endpoint (0 disables it; the DaemonSet sets :9849)")
	fs.StringVar(&f.healthAddr, "health-probe-bind-address", "127.0.0.1:9850", healthProbeUsage)
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients the API server authenticates and authorizes (get on /metrics); false serves plain HTTP to anyone")
	fs.StringVar(&f.metricsCert, "metrics-cert-dir", "", metricsauth.CertDirUsage)
	fs.StringVar(&f.nriSocket, "nri-socket", nri.DefaultSocket, nriSocketUsage)
	fs.StringVar(&f.podSource, "pod-source", loop.PodSourceRuntime, podSourceUsage)
	f.log.AddFlags(fs)
}

func runLoop(ctx context.Context, f loopFlags, stderr io.Writer) error {
	o := f.o
	if o.NodeName == "" {
		return &cli.UsageError{Err: errors.New("agent: --node-name (or NODE_NAME) is required")}
	}
	if err := checkPodSource(f.podSource, f.nriSocket); err != nil {
		return &cli.UsageError{Err: fmt.Errorf("agent: %w", err)}
	}
	o.Root = host.New(f.hostRoot)
	o.Log = f.log.Install(stderr)
	o.Log.V(1).Info("Parsed flags", "node", o.NodeName, "hostRoot", f.hostRoot, "kubeconfig", o.Kubeconfig,
		"resync", o.Resync.String(), "metricsBindAddress", f.metricsAddr, "healthProbeBindAddress", f.healthAddr)
	logCPUSource(o.Log, o.Root)
	// The probes answer before the journal is ours: live while waiting
	// for it, not ready until the first pass.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f.healthAddr != "0" {
		o.Health = loop.NewHealth(clock.RealClock{}, o.Resync)
		if _, err := o.Health.Serve(ctx, f.healthAddr, o.Log); err != nil {
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
	if !f.noMeasure {
		mlog := o.Log.WithName("measure")
		o.Meter = loop.NewMeter(measure.New(o.Root, mlog), clock.RealClock{}, mlog)
	}
	if f.metricsAddr != "0" {
		mo, err := metricsauth.ServerOptions(f.metricsAddr, f.metricsSecure, f.metricsCert)
		if err != nil {
			return &cli.UsageError{Err: fmt.Errorf("agent: %w", err)}
		}
		c := metrics.New(o.Root)
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return fmt.Errorf("agent: register metrics: %w", err)
		}
		defer ctrlmetrics.Registry.Unregister(c)
		o.Observer, o.Metrics = c, mo
	}
	if f.nriSocket != "" {
		var pods *nri.Pods
		if f.podSource == loop.PodSourceRuntime {
			plog := o.Log.WithName("nri")
			pods = nri.NewPods(func(err error) { plog.Error(err, "Refused a pod or container the runtime reported") })
			o.RuntimePods = pods
		}
		o.Hook = startHook(ctx, o.Root, o.Root.Path(f.nriSocket), o.Log, pods)
	}
	return loop.Run(ctx, o)
}

// checkPodSource refuses an unknown --pod-source, and Runtime without the
// NRI socket it reads the pods through.
func checkPodSource(source, nriSocket string) error {
	switch source {
	case loop.PodSourceRuntime:
		if nriSocket == "" {
			return errors.New("--pod-source=Runtime reads the node's pods through the runtime's NRI socket, and --nri-socket is empty; " +
				"set it, or --pod-source=APIServer (chart value agent.podSource)")
		}
		return nil
	case loop.PodSourceAPIServer:
		return nil
	}
	return fmt.Errorf("--pod-source %q: want %s or %s", source, loop.PodSourceRuntime, loop.PodSourceAPIServer)
}

// startHook runs the agent's NRI plugin until ctx ends: it registers
// whenever the socket exists and reconnects with backoff when the runtime
// restarts. With pods (Runtime mode) it feeds them the runtime's pods.
// It journals the containers it starts real-time in the agent's journal
// (rtsched.JournalStarted), so the loop's engine restores them.
func startHook(ctx context.Context, root *host.Root, socket string, log logr.Logger, pods *nri.Pods) *nri.Plugin {
	log = log.WithName("nri")
	nri.SetLog(log)
	eng := &apply.Engine{Root: root, Log: log}
	opts := []nri.Option{nri.WithRealtimeJournal(func(pod podcgroup.Pod, pid int, v rtsched.Value) error {
		return rtsched.JournalStarted(root, eng.Adopt, pod, pid, v)
	})}
	if pods != nil {
		opts = append(opts, nri.WithPods(pods))
	}
	p := nri.New(socket, log, opts...)
	go func() { _ = p.Run(ctx) }()
	return p
}

// logCPUSource says where the agent reads kubelet's exclusive CPU
// assignments: the PodResources API, or the checkpoint file and why.
func logCPUSource(log logr.Logger, root *host.Root) {
	s, err := cpumanager.Read(root)
	switch {
	case err != nil:
		log.Error(err, "Could not read kubelet's CPU assignments")
	case s == nil:
		log.Info("Found no kubelet CPU manager: no PodResources socket and no checkpoint", "socket", cpumanager.SocketPath(root))
	case s.Source == cpumanager.SourcePodResources:
		log.Info("Reading kubelet's CPU assignments from its PodResources API", "source", s.Source, "policy", s.PolicyName)
	default:
		log.Info("Reading kubelet's CPU assignments from its checkpoint file: the PodResources API is unavailable",
			"source", s.Source, "policy", s.PolicyName, "reason", s.Fallback)
	}
}

// oneShotFlags are the flags of plan, apply and revert.
type oneShotFlags struct {
	specFile, hostRoot, allowedFile string
	log                             logging.Options
}

func oneShotCommand(name, short string) *cobra.Command {
	var f oneShotFlags
	use := name + " --node-spec FILE [flags]"
	if name == "revert" {
		use = name + " [flags]"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOneShot(name, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.specFile, "node-spec", "", "LatencyNode YAML (or just its spec, or a LatencyProfile)")
	fs.StringVar(&f.hostRoot, "host-root", "/", "the host's filesystem root")
	fs.StringVar(&f.allowedFile, "allowed-sysctls-file", "", allowedSysctlsUsage)
	f.log.AddFlags(fs)
	return cmd
}

func runOneShot(cmd string, f oneShotFlags, out, stderr io.Writer) error {
	// A usage error before anything is read or owned.
	if cmd != "revert" && f.specFile == "" {
		return &cli.UsageError{Err: fmt.Errorf("agent %s: --node-spec is required", cmd)}
	}
	admin, err := sysctl.ReadAdminList(f.allowedFile)
	if err != nil {
		return fmt.Errorf("agent %s: %w", cmd, err)
	}
	root := host.New(f.hostRoot)
	eng := &apply.Engine{Root: root, Log: f.log.New(stderr), Hook: crashHook}
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
	spec, err := loadSpecFile(f.specFile)
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
	mine, owned := plan.Own(st.Knobs, otherOwners(root, spec, out))
	d, err := eng.Preview(mine)
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
	printResults(out, owned)
	printResults(out, st.Results)
	fmt.Fprintf(out, "%d change(s), %d restore(s); nothing was written\n", len(d.Plan.Changes), len(d.Orphans))
	return nil
}

// otherOwners detects the node's other writers for a one-shot command (no
// pods: the node-wide owners), noting what it could not read.
func otherOwners(root *host.Root, spec v1alpha1.LatencyNodeSpec, out io.Writer) plan.OwnerOf {
	set := owners.Detect(root, owners.Input{Isolated: snapshot.ParseCPUs(spec.Tuning.CPUs).Isolated})
	for _, err := range set.Errs {
		fmt.Fprintf(out, "note: other writers: %v\n", err)
	}
	return set.OwnerOf
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
	rep, err := eng.Apply(apply.Meta{Profile: spec.Profile, Generation: spec.ProfileGeneration,
		Owner: otherOwners(eng.Root, spec, out)}, st.Knobs)
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
