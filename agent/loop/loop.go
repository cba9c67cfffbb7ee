// Package loop is the long-running node agent. It watches only its own
// LatencyNode (field selector metadata.name) and the pods on its node: from
// the container runtime through its NRI plugin (Runtime mode, no right on
// pods), or from the API server with field selector spec.nodeName
// (APIServer mode; pods.go), applies the spec on every change and again every
// resync interval to catch drift (reported, then re-asserted), reverts on a
// Revert spec or when its LatencyNode is gone (so a journal left for a spec
// it no longer has is restored on start), under action Baseline only
// measures, and patches only its own LatencyNode's status subresource (as
// field manager latencytier-agent): when something a reader acts on changed,
// and otherwise once per heartbeat (reportDue). Measurement runs beside the
// loop on its own clock (Meter) and enqueues a window pass after every
// window (window.go): the newest full pass's status with the window's
// figures, no probe, render or apply. It writes the window as rollout
// evidence (status.current and status.baseline) when it is new evidence,
// and leaves it to the heartbeat when it only repeats the written figures.
package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/agent/tiersched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Options configure the agent.
type Options struct {
	NodeName   string
	Kubeconfig string
	Resync     time.Duration
	// Heartbeat is the longest the agent leaves its status unwritten when
	// nothing a reader acts on changed; <= 0: DefaultHeartbeat.
	Heartbeat time.Duration
	Root      *host.Root
	Log       logr.Logger
	// Config overrides Kubeconfig (tests pass envtest's config).
	Config *rest.Config
	// Meter, when set, measures beside the loop (a manager Runnable) and
	// enqueues a window pass after every window.
	Meter *Meter
	// Metrics serves the manager's metrics endpoint; off (BindAddress "0")
	// when BindAddress is empty.
	Metrics metricsserver.Options
	// Observer, when set, is told every pass's status, re-asserts and
	// measurement window (agent/metrics).
	Observer Observer
	// AllowedSysctlsFile is the cluster admin's sysctl unlock (ConfigMap
	// latencytier-sysctls mounted into the pod), read on every pass; ""
	// or missing: the built-in allowlist only.
	AllowedSysctlsFile string
	// Health, when set, is told the informer caches and every pass's
	// progress, for the agent's /healthz and /readyz (the caller serves
	// it and tells it when the journal is owned).
	Health *Health
	// Boot is the agent's side of managed reboots: its reboot slots
	// (SlotsFile, SlotsNamespace) and, in tests, Reboot.
	Boot BootOptions
	// HostTool runs the host tools settings need (update-grub); nil: on
	// the host through its systemd. Tests pass a stand-in.
	HostTool knob.RunFunc
	// Hook, when set, is the agent's NRI plugin (agent/nri): each pass
	// publishes what grants a container to it, and status reports its
	// connection (RuntimeHookConnected).
	Hook RuntimeHook
	// RuntimePods, when set, is the agent's pod source (Runtime mode,
	// --pod-source=Runtime): the pods the runtime reports to the NRI
	// plugin. The agent then starts no pod informer and needs no right
	// on pods. nil: APIServer mode, an informer on the node's pods.
	RuntimePods RuntimePods
}

// Observer is told what the agent did and measured, for its metrics.
type Observer interface {
	// Observed is the status a pass computed for spec (empty when the
	// node has no LatencyNode).
	Observed(spec v1alpha1.LatencyNodeSpec, st v1alpha1.LatencyNodeStatus)
	// Reasserted names the settings a pass wrote back after something
	// else changed them.
	Reasserted(settings []string)
	// Measured is one measurement window.
	Measured(res *measure.Result)
}

// FieldOwner is the agent's field manager and user agent: managedFields
// and audit logs tell its writes from the manager's.
const FieldOwner = "latencytier-agent"

// Run starts the agent and blocks until ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	cfg, err := restConfig(o)
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = FieldOwner
	ctrllog.SetLogger(o.Log)
	if o.Metrics.BindAddress == "" {
		o.Metrics.BindAddress = "0"
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// One agent per process in production; tests start several.
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:                 o.Log,
		Metrics:                o.Metrics,
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: byObject(o)},
	})
	if err != nil {
		return fmt.Errorf("create agent manager: %w", err)
	}
	o.Health.watchCaches(mgr.GetCache().WaitForCacheSync)
	r := &Reconciler{Client: client.WithFieldOwner(mgr.GetClient(), FieldOwner), NodeName: o.NodeName, Root: o.Root,
		Resync: o.Resync, Heartbeat: o.Heartbeat,
		Engine: &apply.Engine{Root: o.Root, Log: o.Log, HostTool: o.HostTool, Hook: func(apply.Stage, string) { o.Health.progress() }}, Meter: o.Meter,
		Recorder: mgr.GetEventRecorder("latencytier-agent"), Observer: o.Observer, AllowedSysctlsFile: o.AllowedSysctlsFile,
		Health: o.Health, Boot: o.Boot, Reader: mgr.GetAPIReader(), Hook: o.Hook, tier: newTierState()}
	if o.RuntimePods != nil {
		r.Pods = o.RuntimePods
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	// The tier scheduler's watch: an ejection by the kernel is recorded
	// within a second and enqueues a pass, which reports Fallback.
	if err := mgr.Add(&tiersched.Watcher{Root: o.Root, Revision: r.tier.currentRevision, OnEject: r.tier.signal, Log: o.Log,
		Wanted: r.tier.wanted.Load, Wake: r.tier.wake}); err != nil {
		return err
	}
	if o.Meter != nil {
		o.Meter.observer = o.Observer
		if err := mgr.Add(o.Meter); err != nil {
			return err
		}
	}
	o.Log.Info("Started agent", "node", o.NodeName, "hostRoot", o.Root.Dir(), "resync", o.Resync.String(),
		"statusHeartbeat", o.Heartbeat.String(), "podSource", o.podSource())
	runErr := mgr.Start(ctx)
	// The pod may be stopped because the node left the tier (the controller
	// removed its label and LatencyNode, so the DaemonSet no longer runs
	// here): then no agent would ever come back to revert. Ask the API
	// server directly, not the cache, before exiting.
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return errors.Join(runErr, err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownCheckTimeout)
	defer cancel()
	revertIfGone(sctx, direct, r.Engine, o.NodeName, o.Log)
	return runErr
}

// byObject confines the manager's informers: its own LatencyNode, and in
// APIServer mode the pods on its node. In Runtime mode there is no pod
// informer (the role grants nothing on pods).
func byObject(o Options) map[client.Object]cache.ByObject {
	m := map[client.Object]cache.ByObject{
		&v1alpha1.LatencyNode{}: {Field: fields.OneTermEqualSelector("metadata.name", o.NodeName)},
	}
	if o.RuntimePods == nil {
		m[&corev1.Pod{}] = cache.ByObject{Field: fields.OneTermEqualSelector("spec.nodeName", o.NodeName)}
	}
	return m
}

func (o Options) podSource() string {
	if o.RuntimePods != nil {
		return PodSourceRuntime
	}
	return PodSourceAPIServer
}

func restConfig(o Options) (*rest.Config, error) {
	if o.Config != nil {
		return o.Config, nil
	}
	if o.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %s: %w", o.Kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("load in-cluster config: %w", err)
	}
	return cfg, nil
}
