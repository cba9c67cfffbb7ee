// Package nri is the agent's NRI mode: it registers the agent as a plugin of
// the container runtime (containerd 2, CRI-O) through the containerd/nri
// stub, so a granted pod's container is created without a CFS quota and on
// the isolated CPUs instead of being fixed one agent pass later. Who is
// granted is decided by the same rules as the file path
// (desired.SortOptIns over the profile's namespace selectors); the pod's own
// annotations count only as an ask, as they do there. The plugin fails open:
// when no decision is ready within Bound it answers with no adjustment, and
// the agent's next pass writes the files as before.
package nri

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	nriversion "github.com/containerd/nri/pkg/version"
	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/owners"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// DefaultSocket is where containerd and CRI-O listen for NRI plugins.
const DefaultSocket = "/var/run/nri/nri.sock"

// DefaultBound is the longest the plugin takes to decide a request before
// it answers with no adjustment: a tenth of the runtime's 2 s request
// timeout, so a slow agent never delays a container's start by much and
// never makes the runtime drop the plugin.
const DefaultBound = 200 * time.Millisecond

// pluginName and pluginIndex name the plugin to the runtime; the index
// orders it among plugins (lower runs first). 90 runs after resource
// policies (nri-plugins use 10), which own cpusets when they are present.
const (
	pluginName  = "latencytier"
	pluginIndex = "90"
)

// Grants is what the agent's last pass knew that decides a container: the
// node's tuning, the labels of every namespace (they grant), and the node's
// online CPUs (the shared pool when nobody else placed a container).
type Grants struct {
	Tuning     v1alpha1.TuningSpec
	Namespaces map[string]map[string]string
	// Online is the node's online CPUs as a cpulist; a container whose
	// requested cpuset is neither empty nor Online was placed by someone
	// else (kubelet's static CPU manager, a DRA driver, another plugin).
	Online string
	// RTRefused, when not empty, says why a container created real-time
	// could fail to start on this node (rtsched.CreateRefused): the plugin
	// then sets no scheduling policy and the file path decides alone.
	RTRefused string
}

// Decision is what the agent adjusts on one container.
type Decision struct {
	// RemoveQuota: the pod is granted CFS quota removal.
	RemoveQuota bool
	// CPUs is the cpuset to place the container on ("" leaves it).
	CPUs string
	// Sched is the real-time policy the container's process starts with
	// (zero: the runtime's own).
	Sched rtsched.Value
}

// Empty reports whether the decision adjusts nothing.
func (d Decision) Empty() bool { return !d.RemoveQuota && d.CPUs == "" && d.Sched == (rtsched.Value{}) }

// DecideFunc decides one container; it may block (the plugin bounds it).
type DecideFunc func(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (Decision, error)

// Decide is the grant decision for a container from g, by the agent's own
// rules: desired.SortOptIns on the pod alone, then the cpuset only where
// nobody else placed the container (the request's cpuset is empty, or the
// whole online set: kubelet's `none` policy, or the static policy's shared
// pool on a node with no exclusive assignment).
func Decide(g *Grants, pod *api.PodSandbox, ctr *api.Container) Decision {
	if g == nil || pod == nil {
		return Decision{}
	}
	p := podcgroup.Pod{UID: pod.GetUid(), Namespace: pod.GetNamespace(), Name: pod.GetName(),
		Labels: pod.GetLabels(), Annotations: pod.GetAnnotations(), NamespaceLabels: g.Namespaces[pod.GetNamespace()]}
	o := desired.SortOptIns(g.Tuning, []podcgroup.Pod{p})
	var d Decision
	// Burst keeps the quota: NRI (v0.12's LinuxCPU has no burst field)
	// cannot set a burst at creation, so the agent's next pass sets it.
	d.RemoveQuota = len(o.Quota) == 1 && !o.Quota[0].Burst
	if len(o.Isolated) == 1 && g.Tuning.CPUs != nil && g.Tuning.CPUs.Isolated != nil && unplaced(g, ctr) {
		d.CPUs = *g.Tuning.CPUs.Isolated
	}
	d.Sched = realtime(g, p, ctr, d.CPUs)
	return d
}

// realtime is the real-time policy p's container starts with, by the file
// path's rules (desired's realtime, rtsched.Check): the pod asks
// (annotation latencytier.io/sched-policy), realtime.namespaceSelector
// grants its namespace, the profile isolates CPUs and allows the policy and
// priority, and the container's cpuset (placed, the plugin's own or
// another owner's) is a non-empty subset of the isolated CPUs, all of
// them online. Another plugin's scheduler is left (the runtime gives a
// field one owner), and so is every container where the kernel could
// refuse the policy at start (g.RTRefused): the container would not start.
func realtime(g *Grants, p podcgroup.Pod, ctr *api.Container, placed string) rtsched.Value {
	ask, ok := p.Annotations[v1alpha1.SchedPolicyAnnotation]
	t := g.Tuning
	if !ok || t.Realtime == nil || !podcgroup.Granted(p.NamespaceLabels, t.Realtime.NamespaceSelector) ||
		g.RTRefused != "" || ctr.GetLinux().GetScheduler() != nil {
		return rtsched.Value{}
	}
	v, no := rtsched.Check(t, ask)
	if no != nil || !v.Realtime() {
		return rtsched.Value{}
	}
	cpus := placed
	if cpus == "" {
		cpus = ctr.GetLinux().GetResources().GetCpu().GetCpus()
	}
	got, err1 := cpulist.Parse(cpus)
	isolated, err2 := cpulist.Parse(*t.CPUs.Isolated) // Check: set
	online, err3 := cpulist.Parse(g.Online)
	if err1 != nil || err2 != nil || err3 != nil || !isolated.IsSubsetOf(online) || !rtsched.Within(got, isolated) {
		return rtsched.Value{}
	}
	return v
}

// scheduler is v as the OCI spec's process.scheduler, with
// SCHED_FLAG_RESET_ON_FORK as rtsched writes it: what the container's
// process forks or clones later starts as SCHED_OTHER, and the agent's next
// pass journals and sets it (the file path).
func scheduler(v rtsched.Value) *api.LinuxScheduler {
	pol := api.LinuxSchedulerPolicy_SCHED_FIFO
	if v.Policy == "rr" {
		pol = api.LinuxSchedulerPolicy_SCHED_RR
	}
	return &api.LinuxScheduler{Policy: pol, Priority: int32(v.N),
		Flags: []api.LinuxSchedulerFlag{api.LinuxSchedulerFlag_SCHED_FLAG_RESET_ON_FORK}}
}

// unplaced reports whether the container's requested cpuset is nobody's:
// empty, or every online CPU.
func unplaced(g *Grants, ctr *api.Container) bool {
	cpus := ctr.GetLinux().GetResources().GetCpu().GetCpus()
	if cpus == "" {
		return true
	}
	req, err1 := cpulist.Parse(cpus)
	online, err2 := cpulist.Parse(g.Online)
	return err1 == nil && err2 == nil && !online.IsEmpty() && req.Equals(online)
}

// State is whether the plugin is connected to the runtime.
type State struct {
	// Reason is v1alpha1.ReasonHookConnected, ReasonHookNoSocket or
	// ReasonHookDisconnected.
	Reason  string
	Message string
}

// Plugin is the agent's NRI plugin. Its zero value is not usable: New.
type Plugin struct {
	socket string
	bound  time.Duration
	decide DecideFunc
	log    logr.Logger

	grants atomic.Pointer[Grants]
	// pods, when set, is the agent's pod source (Runtime mode): the
	// plugin feeds it every sandbox and container the runtime reports.
	pods  *Pods
	mu    sync.Mutex
	state State
	// runtime is the runtime's name and version, once connected.
	runtime string
	// rtAtCreate: the connected runtime takes a scheduling policy in a
	// CreateContainer adjustment (schedulerSupport), and rtMsg says so.
	rtAtCreate bool
	rtMsg      string
	// journalRT journals the containers given a real-time policy at
	// creation (WithRealtimeJournal); nil: the plugin sets none.
	journalRT JournalFunc
	// rtGiven are the containers given one and not yet started, by ID.
	rtGiven map[string]startedRT
	// nriVersion, when set, replaces the NRI version the runtime reports
	// (tests: the in-process runtime always reports the module's).
	nriVersion *string
	// placed are the containers whose requested cpuset was set before the
	// plugin saw them (by container ID, at most maxPlaced): the node's
	// other placers, for agent/owners.
	placed map[string]owners.Placement
}

// maxPlaced bounds the placements the plugin remembers.
const maxPlaced = 4096

// notePlaced remembers ctr's requested cpuset when someone set one before
// the plugin (it is empty for a container nobody placed).
func (p *Plugin) notePlaced(pod *api.PodSandbox, ctr *api.Container) {
	p.remember(pod, ctr, ctr.GetLinux().GetResources().GetCpu().GetCpus(), false)
}

// remember records ctr's cpuset: someone else's, or the plugin's own
// (byAgent), which the pass must not take for another placer's when the
// profile's CPUs change.
func (p *Plugin) remember(pod *api.PodSandbox, ctr *api.Container, cpus string, byAgent bool) {
	if cpus == "" || pod == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.placed == nil {
		p.placed = map[string]owners.Placement{}
	}
	if _, ok := p.placed[ctr.GetId()]; !ok && len(p.placed) >= maxPlaced {
		return
	}
	p.placed[ctr.GetId()] = owners.Placement{PodUID: pod.GetUid(), Namespace: pod.GetNamespace(), Pod: pod.GetName(),
		ContainerID: ctr.GetId(), Container: ctr.GetName(), CPUs: cpus, ByAgent: byAgent}
}

// forget drops what notePlaced remembered of container id, or of every
// container of pod uid.
func (p *Plugin) forget(id, uid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range p.placed {
		if k == id || (uid != "" && v.PodUID == uid) {
			delete(p.placed, k)
		}
	}
}

// forgetAll drops every placement: the runtime is about to hand the
// plugin every container again (Synchronize, on each registration).
func (p *Plugin) forgetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.placed = nil
}

// Placements are the containers the runtime handed the plugin with a
// cpuset someone else set, and those the plugin placed itself (ByAgent),
// sorted by container ID.
func (p *Plugin) Placements() []owners.Placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]owners.Placement, 0, len(p.placed))
	for _, v := range p.placed {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b owners.Placement) int { return strings.Compare(a.ContainerID, b.ContainerID) })
	return out
}

// Option configures a Plugin.
type Option func(*Plugin)

// WithBound sets how long a decision may take before the plugin answers
// with no adjustment.
func WithBound(d time.Duration) Option { return func(p *Plugin) { p.bound = d } }

// WithPods makes the plugin the agent's pod source: it subscribes to the
// pod and container lifecycle events as well and feeds c with them
// (Runtime mode, --pod-source=Runtime).
func WithPods(c *Pods) Option { return func(p *Plugin) { p.pods = c } }

// WithDecide replaces the decision (tests stall it).
func WithDecide(f DecideFunc) Option { return func(p *Plugin) { p.decide = f } }

// New is a plugin for the runtime listening on socket.
func New(socket string, log logr.Logger, opts ...Option) *Plugin {
	p := &Plugin{socket: socket, bound: DefaultBound, log: log,
		state: State{Reason: v1alpha1.ReasonHookNoSocket, Message: "not started"}}
	p.decide = func(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (Decision, error) {
		return Decide(p.grants.Load(), pod, ctr), nil
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Publish gives the plugin what the agent's last pass knew; nil grants
// nothing (no LatencyNode, a revert).
func (p *Plugin) Publish(g *Grants) { p.grants.Store(g) }

// State is the plugin's connection to the runtime, for the node condition.
// A Connected message ends with whether this node's containers start with
// their real-time policy (rtNote), as of the last grants published.
func (p *Plugin) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.state
	if s.Reason == v1alpha1.ReasonHookConnected && p.rtMsg != "" {
		s.Message += "; " + p.rtNote()
	}
	return s
}

// rtNote says whether the plugin sets the real-time policy at creation
// here: the runtime's support (schedulerSupport), unless the plugin has no
// journal for it or the node refuses it (Grants.RTRefused: RT group
// scheduling, an agent outside the host's pid namespace). p.mu is held.
func (p *Plugin) rtNote() string {
	switch g := p.grants.Load(); {
	case !p.rtAtCreate:
		return p.rtMsg
	case p.journalRT == nil:
		return "real-time policy at creation: not set through NRI (the plugin has no journal to restore it from); " + rtFallback
	case g != nil && g.RTRefused != "":
		return "real-time policy at creation: not set on this node (" + g.RTRefused + "); " + rtFallback
	}
	return p.rtMsg
}

func (p *Plugin) setState(reason, msg string) {
	if p.pods != nil && reason != v1alpha1.ReasonHookConnected {
		// Without the runtime the agent does not know its node's pods:
		// stop trusting the pods it held (the message says so).
		p.pods.lost(msg)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state.Reason != reason {
		if p.pods != nil && reason != v1alpha1.ReasonHookConnected {
			p.log.Error(nil, "NRI hook changed state: the agent does not know its node's pods and tunes none", "reason", reason, "message", msg)
		} else {
			p.log.Info("NRI hook changed state", "reason", reason, "message", msg)
		}
	}
	p.state = State{Reason: reason, Message: msg}
}

// meanwhile is what happens while the hook is not connected: fileOnly
// without a pod source, PodsUnknownHint with one (Runtime mode).
func (p *Plugin) meanwhile(fileOnly string) string {
	if p.pods != nil {
		return PodsUnknownHint
	}
	return fileOnly
}

// PodsUnknownHint says, in Runtime mode, what an unconnected hook means
// and what to do.
const PodsUnknownHint = "the agent reads its node's pods only from the runtime (agent.podSource: Runtime, --pod-source=Runtime), " +
	"so it tunes no pod until the runtime's NRI is reachable: enable NRI in the runtime (containerd 2: on by default), " +
	"or set agent.podSource: APIServer"

// Backoff bounds the wait between connection attempts.
var (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// Run connects to the runtime whenever its socket exists and reconnects,
// with backoff, when the runtime restarts; it returns when ctx ends.
func (p *Plugin) Run(ctx context.Context) error {
	wait := minBackoff
	for {
		connected := p.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if connected {
			wait = minBackoff
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, maxBackoff)
	}
}

// runOnce registers once and serves until the runtime closes the
// connection; it reports whether registration succeeded.
func (p *Plugin) runOnce(ctx context.Context) bool {
	if _, err := os.Stat(p.socket); err != nil {
		p.setState(v1alpha1.ReasonHookNoSocket, fmt.Sprintf("no NRI socket at %s: %s", p.socket, p.meanwhile("containers are tuned by the file path, one pass after they start")))
		return false
	}
	closed, synced := make(chan struct{}), make(chan struct{})
	var once, syncOnce sync.Once
	h := handler{p: p, synced: func() { syncOnce.Do(func() { close(synced) }) }}
	s, err := stub.New(h, stub.WithPluginName(pluginName), stub.WithPluginIdx(pluginIndex),
		stub.WithSocketPath(p.socket), stub.WithOnClose(func() { once.Do(func() { close(closed) }) }))
	if err != nil {
		p.setState(v1alpha1.ReasonHookDisconnected, fmt.Sprintf("NRI plugin: %v", err))
		return false
	}
	if err := s.Start(ctx); err != nil {
		p.setState(v1alpha1.ReasonHookDisconnected, fmt.Sprintf("NRI registration at %s failed: %v; %s", p.socket, err, p.meanwhile("the file path tunes containers")))
		return false
	}
	// The runtime's NRI version says whether it takes an RT policy.
	nriVersion := s.RuntimeNRIVersion()
	if p.nriVersion != nil {
		nriVersion = *p.nriVersion
	}
	rt, rtMsg := schedulerSupport(nriVersion)
	if nriVersion == "" {
		nriVersion = "unknown"
	}
	p.mu.Lock()
	p.rtAtCreate, p.rtMsg = rt, rtMsg
	p.mu.Unlock()
	// Connected once the runtime synchronized the plugin: only then does
	// it relay container requests to it.
	select {
	case <-synced:
	case <-closed:
		p.setState(v1alpha1.ReasonHookDisconnected, fmt.Sprintf("the runtime closed the NRI connection at %s before synchronizing; reconnecting, %s", p.socket, p.meanwhile("the file path tunes containers meanwhile")))
		s.Stop()
		return false
	case <-ctx.Done():
		s.Stop()
		return false
	}
	p.setState(v1alpha1.ReasonHookConnected, fmt.Sprintf("registered with %s (NRI %s) at %s", p.runtimeName(), nriVersion, p.socket))
	select {
	case <-closed:
		p.setState(v1alpha1.ReasonHookDisconnected, fmt.Sprintf("the runtime closed the NRI connection at %s; reconnecting, %s", p.socket, p.meanwhile("the file path tunes containers meanwhile")))
	case <-ctx.Done():
	}
	s.Stop()
	return true
}

// rtFallback is what happens to the real-time policy where the plugin
// does not set it at creation.
const rtFallback = "the file path sets it on the container's threads after it starts"

// minSchedulerMinor is the first NRI minor release whose runtime side
// applies a plugin's scheduler adjustment to the container's OCI spec
// (containerd/nri e06369e, "allow setting scheduler attributes", first
// tagged v0.11.0). containerd and CRI-O apply every adjustment through the
// NRI module's own spec generator (runtime-tools/generate), so the runtime's
// NRI version decides. A runtime on an older NRI drops the field unread.
const minSchedulerMinor = 11

// schedulerSupport reports whether a runtime reporting NRI version v takes
// a scheduling policy at CreateContainer, and says so for the
// RuntimeHookConnected message. Runtimes report their NRI version from
// NRI v0.12 on (containerd/nri ee82b96, "exchange versions during
// registration"), so any version reported, even one the runtime could not
// determine itself ("0.0.0-unknown", "(devel)"), is v0.12 or later. One
// that reports none is taken for too old: a v0.11 runtime would take the
// policy, but nothing tells it from an older one, and the file path sets
// it one pass later either way.
func schedulerSupport(v string) (bool, string) {
	if v == "" {
		return false, "real-time policy at creation: not set through NRI (the runtime does not report its NRI version, so its NRI predates v0.12; process.scheduler needs v0.11); " + rtFallback
	}
	if major, minor, ok := nriMinor(v); ok && major == 0 && minor < minSchedulerMinor && v != nriversion.UnknownVersion {
		return false, fmt.Sprintf("real-time policy at creation: not set through NRI (the runtime's NRI %s predates v0.11, which added process.scheduler); %s", v, rtFallback)
	}
	return true, "real-time policy at creation: set through NRI (process.scheduler, applied by runc 1.2+ or crun; an older OCI runtime ignores it and " + rtFallback + ")"
}

// nriMinor parses "v0.12.5" (or "0.12", a pre-release or build suffix
// after the patch) into its major and minor numbers.
func nriMinor(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(parts[0])
	minor, err2 = strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil && major >= 0 && minor >= 0
}

// schedName is v for a log, "" for none.
func schedName(v rtsched.Value) string {
	if v == (rtsched.Value{}) {
		return ""
	}
	return v.String()
}

// schedAtCreate reports whether the connected runtime takes a scheduling
// policy at CreateContainer.
func (p *Plugin) schedAtCreate() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rtAtCreate
}

func (p *Plugin) runtimeName() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runtime == "" {
		return "the runtime"
	}
	return p.runtime
}

// decideBounded runs the decision and gives up after p.bound: a decision
// not ready by then is no adjustment (fail open).
func (p *Plugin) decideBounded(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) Decision {
	ctx, cancel := context.WithTimeout(ctx, p.bound)
	defer cancel()
	type answer struct {
		d   Decision
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		d, err := p.decide(ctx, pod, ctr)
		ch <- answer{d, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			p.log.Error(a.err, "Left a container unadjusted: no decision", "pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName())
			return Decision{}
		}
		return a.d
	case <-ctx.Done():
		p.log.Info("Left a container unadjusted: the decision took too long; the next pass tunes it",
			"pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName(), "bound", p.bound.String())
		return Decision{}
	}
}

// handler is the stub's view of the plugin: only the events it needs.
type handler struct {
	p *Plugin
	// synced is called when the runtime synchronizes the plugin.
	synced func()
}

// Synchronize marks the plugin synchronized, and hands the pod source
// every sandbox and container (Runtime mode). Containers that already run
// are left to the file path, which re-asserts them on every pass.
func (h handler) Synchronize(_ context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	if h.p.pods != nil {
		h.p.pods.synchronize(pods, ctrs)
	}
	h.p.forgetAll()
	byID := make(map[string]*api.PodSandbox, len(pods))
	for _, p := range pods {
		byID[p.GetId()] = p
	}
	for _, c := range ctrs {
		h.p.notePlaced(byID[c.GetPodSandboxId()], c)
	}
	h.synced()
	return nil, nil
}

// Configure subscribes to CreateContainer, UpdateContainer, StartContainer
// (to journal a container started real-time), StopPodSandbox and
// RemoveContainer, and in
// Runtime mode to the events that keep the pod source current.
func (h handler) Configure(_ context.Context, _, runtime, version string) (api.EventMask, error) {
	h.p.mu.Lock()
	h.p.runtime = runtime + " " + version
	h.p.mu.Unlock()
	// StopPodSandbox and RemoveContainer forget placements (Placements).
	events := []string{"CreateContainer", "UpdateContainer", "StopPodSandbox", "RemoveContainer"}
	if h.p.pods != nil {
		events = append(events, podEvents...)
	} else if h.p.journalRT != nil {
		events = append(events, "StartContainer")
	}
	return api.MustParseEventMask(events...), nil
}

// podEvents are the events the pod source needs beside CreateContainer
// and UpdateContainer.
var podEvents = []string{"RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "StartContainer", "RemoveContainer", "PostUpdateContainer"}

// RunPodSandbox, StopPodSandbox, RemovePodSandbox, StartContainer,
// RemoveContainer and PostUpdateContainer feed the pod source too; the
// runtime sends them in Runtime mode only (StartContainer also when the
// plugin journals real-time policies).
func (h handler) RunPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	if h.p.pods != nil {
		h.p.pods.runPod(pod)
	}
	return nil
}

func (h handler) StopPodSandbox(_ context.Context, pod *api.PodSandbox) error {
	h.p.forget("", pod.GetUid())
	if h.p.pods != nil {
		h.p.pods.stopPod(pod)
	}
	return nil
}

func (h handler) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	if h.p.pods != nil {
		h.p.pods.removePod(pod)
	}
	return nil
}

// StartContainer journals the container's first thread when the plugin
// gave it a real-time policy at creation (journalStarted): the runtime
// sends it once the container's process exists, before the process runs.
func (h handler) StartContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	h.p.journalStarted(pod, ctr)
	if h.p.pods != nil {
		h.p.pods.container(pod, ctr)
	}
	return nil
}

func (h handler) RemoveContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) error {
	h.p.forget(ctr.GetId(), "")
	h.p.takeRT(ctr.GetId())
	if h.p.pods != nil {
		h.p.pods.removeContainer(ctr)
	}
	return nil
}

func (h handler) PostUpdateContainer(_ context.Context, _ *api.PodSandbox, ctr *api.Container) error {
	if h.p.pods != nil {
		h.p.pods.updated(ctr)
	}
	return nil
}

// CreateContainer removes a granted container's quota and places it.
func (h handler) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if h.p.pods != nil {
		h.p.pods.container(pod, ctr)
	}
	h.p.notePlaced(pod, ctr)
	d := h.p.decideBounded(ctx, pod, ctr)
	if d.Sched != (rtsched.Value{}) && (!h.p.schedAtCreate() || !h.p.giveRT(pod, ctr, d.Sched)) {
		d.Sched = rtsched.Value{}
	}
	if d.Empty() {
		h.p.leftAsMade(pod, ctr)
		return nil, nil, nil
	}
	adj := &api.ContainerAdjustment{}
	if d.RemoveQuota {
		adj.SetLinuxCPUQuota(-1)
	}
	if d.CPUs != "" {
		adj.SetLinuxCPUSetCPUs(d.CPUs)
		h.p.remember(pod, ctr, d.CPUs, true)
	}
	if d.Sched != (rtsched.Value{}) {
		adj.SetLinuxScheduler(scheduler(d.Sched))
	}
	// A decision, logged at the default level like the agent's passes':
	// which container started tuned, before any pass could see it.
	h.p.log.Info("Tuned a container at its creation", "pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName(),
		"quotaRemoved", d.RemoveQuota, "cpus", d.CPUs, "sched", schedName(d.Sched))
	return adj, nil, nil
}

// UpdateContainer re-asserts a granted container's cpuset on a resize. The
// real-time policy is not re-asserted here, and cannot be: NRI's
// ContainerUpdate holds only LinuxResources (a running container's cgroup
// values), no process attribute, and a resize does not change a thread's
// policy; the file path re-asserts a policy someone changed (drift). It
// leaves kubelet's quota as kubelet asked: the runtime reports the
// resources it applied, and kubelet holds an in-place resize in progress
// until they are the ones it asked for. With the quota taken out here,
// kubelet never saw its resize done (make test-node-stack: the pod's
// status kept its old limits). The agent's next pass removes the quota
// from the cgroup, as it does without NRI.
func (h handler) UpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, _ *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	if h.p.pods != nil {
		h.p.pods.updating(ctr)
	}
	d := h.p.decideBounded(ctx, pod, ctr)
	if d.CPUs == "" {
		return nil, nil
	}
	u := &api.ContainerUpdate{ContainerId: ctr.GetId()}
	u.SetLinuxCPUSetCPUs(d.CPUs)
	h.p.remember(pod, ctr, d.CPUs, true)
	return []*api.ContainerUpdate{u}, nil
}

// leftAsMade logs a container created without adjustment: at the default
// level when its pod asked by annotation (someone will look for why), and
// with what the decision had to go on: whether grants were published, the
// pod's namespace known, the annotation seen by the runtime.
func (p *Plugin) leftAsMade(pod *api.PodSandbox, ctr *api.Container) {
	g := p.grants.Load()
	nsKnown := false
	if g != nil {
		_, nsKnown = g.Namespaces[pod.GetNamespace()]
	}
	asked := pod.GetAnnotations()[v1alpha1.CPUQuotaAnnotation]
	log := p.log.V(1)
	if asked != "" {
		log = p.log
	}
	log.Info("Left a container as the runtime made it", "pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName(),
		"grantsPublished", g != nil, "namespaceKnown", nsKnown, "annotation", asked, "annotations", len(pod.GetAnnotations()), "labels", len(pod.GetLabels()))
}
