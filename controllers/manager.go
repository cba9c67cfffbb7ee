// Package controllers holds the latencytier manager (RunManager): the
// profile reconciler, whose pass decides its nodes' selection (which
// profile owns a node, its label and LatencyNode, the revert handshake:
// selection.go), then its finalizer, status aggregation and safe rollout;
// the taint gates. The agent DaemonSets are static manifests; the agent
// label the selection sets on each Node says which one runs there.
// Decisions — node selection, labels, the agent variant, status, the
// rollout's moves — are pure functions in their own files; the reconcilers
// only read, compare and write the difference.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	goruntime "runtime"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/internal/cli"
	"latencytier.io/latencytier/internal/featuregate"
	"latencytier.io/latencytier/internal/logging"
	"latencytier.io/latencytier/internal/metricsauth"
)

// The manager's permissions (config/rbac/role.yaml, generated from these
// markers by `make manifests`), each with the call that needs it. The
// agent's are in config/agent and much narrower.
//
// Profiles: read and watched to select nodes; patch adds and removes the
// revert finalizer (a merge patch on metadata; the spec is never written).
// Status: patch only, the aggregated per-node view (no get: a status patch
// needs none, and the object is read from the cache).
// +kubebuilder:rbac:groups=tuning.latencytier.io,resources=latencyprofiles,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=tuning.latencytier.io,resources=latencyprofiles/status,verbs=patch
//
// LatencyNodes: the manager creates one per selected node, patches its spec
// (profile, tuning, Apply/Revert) and deletes it once the node is reverted
// or gone; it never writes their status (the agent's).
// +kubebuilder:rbac:groups=tuning.latencytier.io,resources=latencynodes,verbs=get;list;watch;create;patch;delete
//
// Nodes: read for selection and readiness; patch sets and removes the
// latencytier.io/profile label and the owned-labels annotation, the
// tuning-pending taint (taint.go) and spec.unschedulable (a managed
// reboot's cordon, executor/cordon.go), and nothing else: RBAC cannot say
// that, so the ValidatingAdmissionPolicy latencytier-manager-node-labels
// (config/admission) does. Pods: listed on a node to drain it, and evicted
// (pods/eviction, honouring PodDisruptionBudgets), never deleted.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
//
// No workload: the agent DaemonSets are static manifests (config/agent,
// the chart), so the manager may create or change no DaemonSet, pod or
// other workload. Which DaemonSet runs on a node is decided by the agent
// label the manager sets on the node (v1alpha1.AgentLabel).
//
// Events for every decision a user would ask about (selected, conflict,
// applied, reverted, degraded); patch updates a repeated event's count.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//
// Leader election (--leader-elect), in the operator namespace only: the
// lease lock gets, creates and renews (updates) its Lease; it never lists,
// watches, patches or deletes one.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=latencytier-system,resources=leases,verbs=get;create;update
//
// The secure metrics endpoint asks the API server who a scraper is and
// whether it may get /metrics (config/rbac/metrics_reader_role.yaml).
//
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// options configure the reconcilers.
type options struct {
	// Namespace is the operator namespace (profile revisions, the lease).
	Namespace string
	// UnreachableAfter is how long a NotReady node may hold up a revert.
	UnreachableAfter time.Duration
	// Now is the controllers' clock (time.Now when nil): node reachability,
	// rollout windows, condition times and the status gate all read it;
	// tests inject one.
	Now func() time.Time
	// StatusInterval is the least time between two status writes of a
	// profile that only carry its nodes' reports (defaultStatusInterval
	// when 0).
	StatusInterval time.Duration
	// MaxRebooting bounds the nodes cordoned or rebooting for a managed
	// reboot across all profiles (--max-rebooting; 1 when 0).
	MaxRebooting int
	// RebootPoll is how often a reboot in flight is looked at
	// (defaultRebootPoll when 0).
	RebootPoll time.Duration
	// Gates are the feature gates (--feature-gates).
	Gates featuregate.Gates
}

// NewScheme is the runtime scheme of the manager (and of anything that talks
// to its API server as it does): client-go's types and ours.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// cacheOptions limit the ControllerRevision informer to the operator namespace and
// keep in the cache only what the manager reads: no managedFields on any
// object, and of a Node only its metadata and Ready condition.
func cacheOptions(namespace string) cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}: {Transform: trimNode},
			// Profile revisions (safe rollout) live in the operator namespace too.
			&appsv1.ControllerRevision{}: {Namespaces: map[string]cache.Config{namespace: {}}},
		},
	}
}

// trimNode reduces a Node to what the manager reads — name, UID, labels,
// annotations, the Ready condition, and for the tuning-ready gate and the
// managed reboots its taints, unschedulable and boot id — before it enters
// the cache: a
// kubelet's node carries images, addresses, capacity and managedFields that
// weigh many times more, on every node of the fleet.
func trimNode(in any) (any, error) {
	n, ok := in.(*corev1.Node)
	if !ok {
		return in, nil
	}
	n.ManagedFields = nil
	n.Spec = corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable}
	var ready []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = []corev1.NodeCondition{c}
		}
	}
	n.Status = corev1.NodeStatus{Conditions: ready, NodeInfo: corev1.NodeSystemInfo{BootID: n.Status.NodeInfo.BootID}}
	return n, nil
}

// setup registers the field indexes and the reconcilers with mgr: the
// profile's (with its nodes' selection), the contention taint's and the
// tuning-ready gate's.
func setup(mgr ctrl.Manager, o options) error {
	if err := addIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	rec := mgr.GetEventRecorder("latencytier-controller")
	gate := newStatusGate(o.StatusInterval, o.Now)
	sel := &nodeSelection{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, UnreachableAfter: o.UnreachableAfter, Now: o.Now, Gates: o.Gates}
	profiles := &profileReconciler{Client: mgr.GetClient(), Recorder: rec, UnreachableAfter: o.UnreachableAfter, Select: sel,
		Namespace: o.Namespace, Now: o.Now, Cache: mgr.GetCache(), Gate: gate, Gates: o.Gates,
		Reboots: &rebooter{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Recorder: rec, Max: max(o.MaxRebooting, 1), Poll: o.RebootPoll}}
	// The profile's pass decides its nodes' selection too: Node and
	// LatencyNode events map to the profiles they concern, and a change
	// of a profile's intent to the profiles whose nodes it may move.
	err := ctrl.NewControllerManagedBy(mgr).Named("latencyprofile").
		For(&v1alpha1.LatencyProfile{}, builder.WithPredicates(notOwnStatus(gate))).
		Watches(&v1alpha1.LatencyProfile{}, handler.EnqueueRequestsFromMapFunc(profilesSharingNodes(mgr.GetCache())),
			builder.WithPredicates(profileIntentChanged())).
		Watches(&v1alpha1.LatencyNode{}, latencyNodeToProfiles(gate), builder.WithPredicates(notResync())).
		// The contention taint's writes move status.contentionTainted.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(profilesOfNode(mgr.GetCache())),
			builder.WithPredicates(predicate.Or(nodeChanged(), contentionNodeChanged()), notResync())).
		Complete(retryStale(profiles))
	if err != nil {
		return fmt.Errorf("setting up profile controller: %w", err)
	}
	if err := setupContentionTaints(mgr); err != nil {
		return err
	}
	return setupTaints(mgr, rec)
}

// retryStale turns a write that lost to a newer object into a requeue, not
// an error. Errors are counted by controller-runtime itself
// (controller_runtime_reconcile_errors_total{controller}), so a stale write
// is not counted either.
func retryStale(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if errors.As(err, new(executor.StaleError)) {
			return reconcile.Result{RequeueAfter: staleRetry}, nil
		}
		return res, err
	})
}

// managerFlags are the flags of "latencytier manager".
type managerFlags struct {
	metricsAddr, probeAddr string
	pprofAddr              string
	metricsSecure          bool
	metricsCertDir         string
	leaderElect            bool
	namespace, kubeconfig  string
	// deprecated are the flags of the manager that rendered the agent
	// DaemonSet (--agent-image, --agent-args, --agent-metrics-port): still
	// accepted, so an upgrade that changes only the image starts, and
	// ignored with a warning.
	deprecated       []string
	unreachableAfter time.Duration
	statusInterval   time.Duration
	maxRebooting     int
	gates            featuregate.Gates
	log              logging.Options
}

// addFlags registers the manager's flags, logging's included, on fs.
func (f *managerFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", "127.0.0.1:9847", "address of the Prometheus metrics endpoint (0 disables it)")
	fs.BoolVar(&f.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients the API server authenticates and authorizes (get on /metrics); false serves plain HTTP to anyone, for local use")
	fs.StringVar(&f.metricsCertDir, "metrics-cert-dir", "", metricsauth.CertDirUsage)
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "0", "address of net/http/pprof's /debug/pprof, plain HTTP and unauthenticated: bind it to 127.0.0.1 only, to profile the manager (0 disables it)")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", "127.0.0.1:9848", "address of the /healthz and /readyz endpoints")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader so that only one manager replica reconciles")
	fs.StringVar(&f.namespace, "namespace", "latencytier-system", "operator namespace: profile revisions and the leader-election lease")
	for _, name := range []string{"agent-image", "agent-args", "agent-metrics-port"} {
		fs.Func(name, "deprecated, ignored: the agent DaemonSets are manifests (config/agent, the chart's agent values)", func(string) error {
			f.deprecated = append(f.deprecated, "--"+name)
			return nil
		})
	}
	fs.DurationVar(&f.unreachableAfter, "node-unreachable-timeout", 10*time.Minute, "how long a NotReady node may hold up a revert before its LatencyNode is removed anyway")
	fs.DurationVar(&f.statusInterval, "profile-status-interval", defaultStatusInterval, "least time between two writes of a profile's status that only carry its nodes' reports (a spec change or a rollout step is written at once)")
	fs.IntVar(&f.maxRebooting, "max-rebooting", 1, "most nodes cordoned or rebooting at once for managed reboots (bootParameters.policy Reboot), across all profiles")
	fs.Var(featuregate.Value{Gates: &f.gates}, featuregate.Flag, featuregate.Usage())
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)")
	f.log.AddFlags(fs)
}

// validate checks what the flags' types do not.
func (f *managerFlags) validate() error {
	if f.unreachableAfter <= 0 {
		return &cli.UsageError{Err: errors.New("--node-unreachable-timeout must be positive")}
	}
	if f.statusInterval <= 0 {
		return &cli.UsageError{Err: errors.New("--profile-status-interval must be positive")}
	}
	if f.maxRebooting < 1 {
		return &cli.UsageError{Err: errors.New("--max-rebooting must be at least 1")}
	}
	return nil
}

func parseManagerFlags(args []string) (managerFlags, error) {
	var f managerFlags
	fs := pflag.NewFlagSet("latencytier manager", pflag.ContinueOnError)
	f.addFlags(fs)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return f, f.validate()
}

// NewManagerCommand is "latencytier manager".
func NewManagerCommand() *cobra.Command {
	var f managerFlags
	cmd := &cobra.Command{
		Use:   "manager [flags]",
		Short: "Run the controller: select nodes, hand each its LatencyNode, roll changes out, report per profile",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			return runManager(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	f.addFlags(cmd.Flags())
	return cmd
}

// restConfig is the manager's client config: the --kubeconfig file when
// given, else what ctrl.GetConfig finds (in-cluster, $KUBECONFIG).
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	if cfg.QPS == 0 {
		// As ctrl.GetConfig does: no client-side limit (client-go's default
		// is 5 requests/s), the API server's priority and fairness decide.
		// With the limit, 300 simulated nodes were not all served in 5 min.
		cfg.QPS, cfg.Burst = -1, -1
	}
	return cfg, nil
}

// fieldOwner names the manager in managedFields and, as its user agent, in
// the API server's audit log and metrics; the agent is latencytier-agent.
const fieldOwner = executor.FieldOwner

// managerConfig is cfg with the manager's user agent (unless the caller
// set one: the fleet simulator names its own).
func managerConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	if c.UserAgent == "" {
		c.UserAgent = fieldOwner + " (" + goruntime.GOOS + "/" + goruntime.GOARCH + ")"
	}
	return c
}

// clientOptions make every write of the manager's client name it as the
// field manager, whatever the user agent says.
func clientOptions() client.Options {
	return client.Options{FieldOwner: fieldOwner}
}

// RunManager parses the manager's flags and runs it until ctx ends.
func RunManager(ctx context.Context, args []string) error {
	return cli.Run(ctx, cli.Setup(NewManagerCommand()), args)
}

func runManager(ctx context.Context, f managerFlags, stderr io.Writer) error {
	log := f.log.Install(stderr)
	log.V(1).Info("Parsed flags", "namespace", f.namespace, "kubeconfig", f.kubeconfig, "leaderElect", f.leaderElect,
		"metricsBindAddress", f.metricsAddr, "healthProbeBindAddress", f.probeAddr)
	metricsOpts, err := metricsauth.ServerOptions(f.metricsAddr, f.metricsSecure, f.metricsCertDir)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	cfg, err := restConfig(f.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(managerConfig(cfg), ctrl.Options{
		Scheme:                  NewScheme(),
		Client:                  clientOptions(),
		Cache:                   cacheOptions(f.namespace),
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  f.probeAddr,
		PprofBindAddress:        f.pprofAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "latencytier-manager.latencytier.io",
		LeaderElectionNamespace: f.namespace,
		Logger:                  log,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	opts := options{
		Namespace:        f.namespace,
		UnreachableAfter: f.unreachableAfter,
		StatusInterval:   f.statusInterval,
		MaxRebooting:     f.maxRebooting,
		Gates:            f.gates,
	}
	if err := setup(mgr, opts); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding ready check: %w", err)
	}
	if len(f.deprecated) > 0 {
		log.Info("Ignoring deprecated flags: the agent DaemonSets are manifests now, set their image and arguments there", "flags", f.deprecated)
	}
	log.Info("Starting manager", "namespace", f.namespace, "metricsSecure", f.metricsSecure, "featureGates", f.gates.String())
	return mgr.Start(ctx)
}
