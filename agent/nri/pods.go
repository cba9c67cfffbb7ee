package nri

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/util/validation"

	"latencytier.io/latencytier/agent/podcgroup"
)

// ErrPodsUnknown means the runtime has not told the plugin its pods (it has
// not synchronized it yet, or the connection is gone): the agent does not
// know which pods run on the node, which is not the same as "none".
var ErrPodsUnknown = errors.New("the container runtime has not told the agent its pods")

// Bounds on what the runtime may make the agent hold. The runtime is
// trusted to run containers, not to be well-formed: a sandbox or container
// beyond them is refused (logged), never truncated into a wrong pod.
const (
	// MaxSandboxes is the most pod sandboxes the cache holds: kubelet's
	// maxPods is 110 by default and rarely above 500.
	MaxSandboxes = 4096
	// MaxContainers is the most containers one sandbox may have.
	MaxContainers = 512
	// MaxAnnotationBytes bounds a sandbox's annotations, keys and values:
	// the API server's own limit on a pod's annotations.
	MaxAnnotationBytes = 256 << 10
	// MaxLabels bounds a sandbox's labels.
	MaxLabels = 256
	// maxCgroupParent bounds the sandbox's cgroup parent (a path).
	maxCgroupParent = 4096
)

// DefaultSyncWait is how long Pods waits for the runtime's first
// synchronization before it answers ErrPodsUnknown: the runtime gives a
// plugin 5 s to register, so the agent's first pass after a start does not
// report the pods unknown while the plugin is still connecting.
const DefaultSyncWait = 10 * time.Second

// ResizeHold bounds how long a container counts as resizing after an
// UpdateContainer request without the PostUpdateContainer that ends it (the
// runtime failed the update and sends none): kubelet retries a failed
// resize, which opens the window again.
const ResizeHold = time.Minute

// kubeletLabels are the labels kubelet adds to a pod's sandbox beside the
// pod's own (newPodLabels); they are not the pod's labels.
var kubeletLabels = []string{"io.kubernetes.pod.name", "io.kubernetes.pod.namespace", "io.kubernetes.pod.uid"}

// Pods is the node's pods as the container runtime reports them to the
// agent's NRI plugin: every sandbox and container at registration
// (Synchronize), then their lifecycle events. It is the agent's pod source
// in Runtime mode (--pod-source=Runtime): the runtime only knows its own
// node's pods, so the agent needs no right to read pods from the API
// server. Its zero value is not usable: NewPods.
//
// What the runtime knows differs from the API in two ways, both documented
// in docs/security.md: labels and annotations are those the pod had when
// its sandbox was made (kubelet does not pass later changes to the
// runtime), and Resizing is the runtime's side of an in-place resize (see
// sandbox.resizing).
type Pods struct {
	mu        sync.Mutex
	synced    bool
	why       string
	sandboxes map[string]*sandbox
	// first is closed at the first synchronization.
	first    chan struct{}
	deadline time.Time
	changed  chan struct{}
	now      func() time.Time
	// rejected are the refusal messages already logged, by sandbox or
	// container ID, so a refused object is logged once.
	rejected map[string]bool
	log      func(err error)
}

// sandbox is one pod sandbox and its containers.
type sandbox struct {
	pod podcgroup.Pod
	// stopped: StopPodSandbox came; the pod has finished (or is being
	// deleted) and is no pod of the node any more for tuning.
	stopped bool
	// containers are the sandbox's container IDs, in the order seen.
	containers []string
	// resizing holds, per container ID, when the runtime was asked to
	// update its resources (UpdateContainer) and has not yet reported the
	// update done (PostUpdateContainer).
	resizing map[string]time.Time
}

// NewPods is an empty, unsynchronized cache. log is told every object
// refused as malformed (once per object); nil discards them.
func NewPods(log func(error)) *Pods {
	if log == nil {
		log = func(error) {}
	}
	return &Pods{why: "the agent's NRI plugin has not registered with the runtime yet", sandboxes: map[string]*sandbox{},
		first: make(chan struct{}), deadline: time.Now().Add(DefaultSyncWait), changed: make(chan struct{}, 1),
		now: time.Now, rejected: map[string]bool{}, log: log}
}

// Changed is signalled (coalesced: one pending signal at most) after every
// change that can change a pass: a pod appeared, finished or went, a
// container appeared or went, a resize started or ended, the pods became
// known or unknown.
func (c *Pods) Changed() <-chan struct{} { return c.changed }

func (c *Pods) notify() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Pods are the node's pods that have not finished, without namespace
// labels (the agent reads those from the API server) and in no set order.
// Before the runtime's first synchronization it waits for it, up to
// DefaultSyncWait after NewPods; then, and whenever the plugin is not
// connected, it answers ErrPodsUnknown (wrapped, saying why).
func (c *Pods) Pods(ctx context.Context) ([]podcgroup.Pod, error) {
	c.mu.Lock()
	synced, first, deadline := c.synced, c.first, c.deadline
	c.mu.Unlock()
	if !synced {
		if wait := time.Until(deadline); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-first:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced {
		return nil, fmt.Errorf("%w: %s", ErrPodsUnknown, c.why)
	}
	now := c.now()
	byUID := map[string]*podcgroup.Pod{}
	var out []*podcgroup.Pod
	for _, sb := range c.sandboxes {
		if sb.stopped {
			continue
		}
		// A pod may have two sandboxes for a while (kubelet made a new one
		// and has not removed the old): one pod, all its containers.
		p, ok := byUID[sb.pod.UID]
		if !ok {
			cp := sb.pod
			cp.Labels, cp.Annotations = maps.Clone(cp.Labels), maps.Clone(cp.Annotations)
			p = &cp
			byUID[cp.UID] = p
			out = append(out, p)
		}
		p.ContainerIDs = append(p.ContainerIDs, sb.containers...)
		p.Resizing = p.Resizing || sb.isResizing(now)
	}
	pods := make([]podcgroup.Pod, len(out))
	for i, p := range out {
		pods[i] = *p
	}
	return pods, nil
}

func (sb *sandbox) isResizing(now time.Time) bool {
	for _, at := range sb.resizing {
		if now.Sub(at) < ResizeHold {
			return true
		}
	}
	return false
}

// synchronize replaces the cache with what the runtime holds: every sandbox
// and container, as Synchronize hands them at registration.
func (c *Pods) synchronize(pods []*api.PodSandbox, ctrs []*api.Container) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.sandboxes
	c.sandboxes = make(map[string]*sandbox, len(pods))
	for _, p := range pods {
		c.addSandbox(p)
	}
	for _, ctr := range ctrs {
		if sb := c.sandboxes[ctr.GetPodSandboxId()]; sb != nil {
			c.addContainer(sb, ctr)
		}
	}
	// A resize under way across a reconnect stays under way.
	for id, sb := range c.sandboxes {
		if o := old[id]; o != nil {
			for cid, at := range o.resizing {
				if sb.has(cid) {
					sb.resizing[cid] = at
				}
			}
		}
	}
	if !c.synced {
		c.synced = true
		select {
		case <-c.first:
		default:
			close(c.first)
		}
	}
	c.notify()
}

// lost marks the pods unknown: the plugin is not connected, so pods may
// come and go unseen until the next synchronization.
func (c *Pods) lost(why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := c.synced || c.why != why
	c.synced, c.why = false, why
	if changed {
		c.notify()
	}
}

// runPod adds a sandbox (RunPodSandbox).
func (c *Pods) runPod(p *api.PodSandbox) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.addSandbox(p) != nil {
		c.notify()
	}
}

// stopPod marks a sandbox finished (StopPodSandbox).
func (c *Pods) stopPod(p *api.PodSandbox) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sb := c.sandboxes[p.GetId()]; sb != nil && !sb.stopped {
		sb.stopped = true
		c.notify()
	}
}

// removePod forgets a sandbox (RemovePodSandbox).
func (c *Pods) removePod(p *api.PodSandbox) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.sandboxes[p.GetId()]; ok {
		delete(c.sandboxes, p.GetId())
		c.notify()
	}
	delete(c.rejected, p.GetId())
}

// container adds a container to its sandbox (CreateContainer,
// StartContainer), learning the sandbox first if the runtime sent none.
func (c *Pods) container(p *api.PodSandbox, ctr *api.Container) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sb := c.sandboxes[ctr.GetPodSandboxId()]
	if sb == nil && p.GetId() == ctr.GetPodSandboxId() {
		sb = c.addSandbox(p)
	}
	if sb != nil && c.addContainer(sb, ctr) {
		c.notify()
	}
}

// removeContainer forgets a container (RemoveContainer).
func (c *Pods) removeContainer(ctr *api.Container) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sb := c.sandboxes[ctr.GetPodSandboxId()]
	delete(c.rejected, ctr.GetId())
	if sb == nil {
		return
	}
	delete(sb.resizing, ctr.GetId())
	if i := indexOf(sb.containers, ctr.GetId()); i >= 0 {
		sb.containers = append(sb.containers[:i], sb.containers[i+1:]...)
		c.notify()
	}
}

// updating opens a container's resize window (UpdateContainer: kubelet
// asks the runtime to change its resources, which it does for an in-place
// resize).
func (c *Pods) updating(ctr *api.Container) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sb := c.sandboxes[ctr.GetPodSandboxId()]
	if sb == nil || !sb.has(ctr.GetId()) {
		return
	}
	was := sb.isResizing(c.now())
	sb.resizing[ctr.GetId()] = c.now()
	if !was {
		c.notify()
	}
}

// updated closes it (PostUpdateContainer: the runtime wrote them).
func (c *Pods) updated(ctr *api.Container) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sb := c.sandboxes[ctr.GetPodSandboxId()]
	if sb == nil {
		return
	}
	if _, ok := sb.resizing[ctr.GetId()]; ok {
		delete(sb.resizing, ctr.GetId())
		c.notify()
	}
}

func (sb *sandbox) has(id string) bool { return indexOf(sb.containers, id) >= 0 }

func indexOf(ids []string, id string) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// addSandbox validates p and holds it; nil when refused. A sandbox seen
// again keeps its containers.
func (c *Pods) addSandbox(p *api.PodSandbox) *sandbox {
	if sb := c.sandboxes[p.GetId()]; sb != nil {
		return sb
	}
	pod, err := sandboxPod(p)
	if err == nil && len(c.sandboxes) >= MaxSandboxes {
		err = fmt.Errorf("pod sandbox %s: the runtime reports more than %d sandboxes; refused", p.GetId(), MaxSandboxes)
	}
	if err != nil {
		c.refuse(p.GetId(), err)
		return nil
	}
	sb := &sandbox{pod: pod, resizing: map[string]time.Time{}}
	c.sandboxes[p.GetId()] = sb
	return sb
}

// addContainer validates ctr and adds its ID to sb; false when refused or
// already there.
func (c *Pods) addContainer(sb *sandbox, ctr *api.Container) bool {
	id := ctr.GetId()
	if err := checkID("container", "id", id); err != nil {
		c.refuse(id, fmt.Errorf("container of pod %s/%s: %w", sb.pod.Namespace, sb.pod.Name, err))
		return false
	}
	if sb.has(id) {
		return false
	}
	if len(sb.containers) >= MaxContainers {
		c.refuse(id, fmt.Errorf("container %s of pod %s/%s: the pod already has %d containers; refused", id, sb.pod.Namespace, sb.pod.Name, MaxContainers))
		return false
	}
	sb.containers = append(sb.containers, id)
	return true
}

func (c *Pods) refuse(key string, err error) {
	if key == "" || len(key) > 128 {
		key = "?"
	}
	if c.rejected[key] || len(c.rejected) > MaxSandboxes {
		return
	}
	c.rejected[key] = true
	c.log(err)
}

// idPattern is what runtimes make sandbox and container IDs of (containerd
// and CRI-O: 64 hex digits).
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// uidPattern is a pod UID (a UUID; a static pod's is a hex hash): it names
// the pod's cgroup directory, so nothing that could leave it.
var uidPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z-]{0,63}$`)

func checkID(what, field, id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%s field %s: %q is not a runtime ID (letters, digits, _ . -, at most 128)", what, field, clip(id))
	}
	return nil
}

// sandboxPod is the pod a sandbox stands for, every field checked.
func sandboxPod(p *api.PodSandbox) (podcgroup.Pod, error) {
	if p == nil {
		return podcgroup.Pod{}, errors.New("pod sandbox: none")
	}
	if err := checkID("pod sandbox", "id", p.GetId()); err != nil {
		return podcgroup.Pod{}, err
	}
	fail := func(field, format string, args ...any) (podcgroup.Pod, error) {
		return podcgroup.Pod{}, fmt.Errorf("pod sandbox %s field %s: %s", p.GetId(), field, fmt.Sprintf(format, args...))
	}
	if !uidPattern.MatchString(p.GetUid()) {
		return fail("uid", "%q is not a pod UID", clip(p.GetUid()))
	}
	if errs := validation.IsDNS1123Label(p.GetNamespace()); len(errs) > 0 {
		return fail("namespace", "%q: %s", clip(p.GetNamespace()), errs[0])
	}
	if errs := validation.IsDNS1123Subdomain(p.GetName()); len(errs) > 0 {
		return fail("name", "%q: %s", clip(p.GetName()), errs[0])
	}
	labels, err := podLabels(p.GetLabels())
	if err != nil {
		return fail("labels", "%v", err)
	}
	size := 0
	for k, v := range p.GetAnnotations() {
		size += len(k) + len(v)
	}
	if size > MaxAnnotationBytes {
		return fail("annotations", "%d bytes, more than the %d a pod may have", size, MaxAnnotationBytes)
	}
	parent := p.GetLinux().GetCgroupParent()
	if len(parent) > maxCgroupParent {
		return fail("linux.cgroup_parent", "%d bytes long", len(parent))
	}
	return podcgroup.Pod{UID: p.GetUid(), Namespace: p.GetNamespace(), Name: p.GetName(), Labels: labels,
		Annotations: maps.Clone(p.GetAnnotations()), QOSClass: QOSClass(parent, p.GetUid())}, nil
}

// podLabels are the pod's own labels from its sandbox's: kubelet's own
// (kubeletLabels) taken out, every other one a valid label.
func podLabels(in map[string]string) (map[string]string, error) {
	if len(in) > MaxLabels+len(kubeletLabels) {
		return nil, fmt.Errorf("%d labels, more than %d", len(in), MaxLabels)
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		if indexOf(kubeletLabels, k) >= 0 {
			continue
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("key %q: %s", clip(k), errs[0])
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("%s: value %q: %s", k, clip(v), errs[0])
		}
		out[k] = v
	}
	return out, nil
}

// QoS classes as the API names them (status.qosClass).
const (
	QOSGuaranteed = "Guaranteed"
	QOSBurstable  = "Burstable"
	QOSBestEffort = "BestEffort"
)

// QOSClass is a pod's QoS class from its sandbox's cgroup parent, which
// kubelet makes from it: cgroupfs "…/kubepods[/burstable|/besteffort]/pod<uid>",
// systemd "kubepods[-burstable|-besteffort]-pod<uid with _>.slice" (the
// leaf slice, or a path ending in it). Guaranteed pods sit directly under
// kubepods. "" when the parent is not a kubelet pod cgroup of this UID:
// unknown, never a guess.
func QOSClass(parent, uid string) string {
	if parent == "" || uid == "" {
		return ""
	}
	base := path.Base(parent)
	if leaf, ok := strings.CutSuffix(base, ".slice"); ok {
		return systemdQOS(leaf, uid)
	}
	if base != "pod"+uid {
		return ""
	}
	switch path.Base(path.Dir(parent)) {
	case "burstable":
		return QOSBurstable
	case "besteffort":
		return QOSBestEffort
	case podcgroup.DefaultKubepods:
		return QOSGuaranteed
	}
	return ""
}

func systemdQOS(leaf, uid string) string {
	prefix, ok := strings.CutSuffix(leaf, "-pod"+strings.ReplaceAll(uid, "-", "_"))
	if !ok {
		return ""
	}
	switch prefix {
	case podcgroup.DefaultKubepods + "-burstable":
		return QOSBurstable
	case podcgroup.DefaultKubepods + "-besteffort":
		return QOSBestEffort
	case podcgroup.DefaultKubepods:
		return QOSGuaranteed
	}
	return ""
}

// clip shortens a hostile value for a message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
