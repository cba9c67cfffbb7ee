package controllers

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
)

// The managed reboots against a real API server. Each test has its own
// envtest (kube-apiserver and etcd) and its own manager, so it sets
// --max-rebooting, moves the manager's clock and restarts the manager. A
// stand-in plays each node's kubelet (Ready, boot id, removing terminated
// pods) and agent (staged arguments, the reboot on request: a new boot id,
// then Applied in it).

const rebootWaitFor = 60 * time.Second

// rebootEnv is one test's API server, manager and stand-in.
type rebootEnv struct {
	t     *testing.T
	c     client.Client
	cfg   envtestConfig
	clock *testClock
	sim   *standIn
	stop  func() // stops the running manager and waits for it
	// patches counts the manager's profile status patches per pass.
	patches *statusPatchCounter
}

type envtestConfig struct{ env *envtest.Environment }

// testClock is the manager's clock: real time plus an offset a test moves
// forward to cross a timeout at once.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

func startRebootEnv(t *testing.T, maxRebooting int) *rebootEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("starts its own kube-apiserver")
	}
	if err := ensureAssets(); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{testNamespace, "work"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	e := &rebootEnv{t: t, c: c, cfg: envtestConfig{env}, clock: &testClock{}, patches: newStatusPatchCounter()}
	e.sim = newStandIn(t, c)
	e.startManager(maxRebooting)
	t.Cleanup(func() {
		if e.stop != nil {
			e.stop()
		}
	})
	return e
}

// startManager runs a manager against the test's API server.
func (e *rebootEnv) startManager(maxRebooting int) {
	e.t.Helper()
	sync := testSyncPeriod
	opts := cacheOptions(testNamespace)
	opts.SyncPeriod = &sync
	mgr, err := ctrl.NewManager(managerConfig(e.cfg.env.Config), ctrl.Options{
		Scheme: NewScheme(), Client: clientOptions(), Cache: opts,
		Metrics: metricsserver.Options{BindAddress: "0"}, Logger: testLogger(),
		// A second manager in the same process (the restart) registers
		// its controllers under the same names.
		Controller: ctrlConfigSkipNameValidation(),
		NewClient:  e.patches.newClient,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	err = setup(mgr, options{Namespace: testNamespace, UnreachableAfter: testUnreachable, Now: e.clock.Now,
		MaxRebooting: maxRebooting, RebootPoll: 200 * time.Millisecond})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Println("manager stopped:", err)
		}
	}()
	e.stop = func() {
		cancel()
		<-done
		e.stop = nil
	}
}

// rebootProfile selects the nodes labelled tier=name, with boot policy
// Reboot under a rollout whose canary is one node (a Reboot policy stages
// nothing without a canary smaller than the selection: a one-node test
// adds e.spare).
func (e *rebootEnv) rebootProfile(name string, reboot *v1alpha1.RebootSpec) *v1alpha1.LatencyProfile {
	e.t.Helper()
	return e.rebootProfileCanary(name, reboot, 1)
}

// rebootProfileCanary is rebootProfile with a canary of canary nodes, all
// moved at once (maxInFlight canary).
func (e *rebootEnv) rebootProfileCanary(name string, reboot *v1alpha1.RebootSpec, canary int32) *v1alpha1.LatencyProfile {
	e.t.Helper()
	ro := testRebootRollout()
	ro.Canary.Nodes, ro.MaxInFlight = ptr.To(intstr.FromInt32(canary)), ptr.To(intstr.FromInt32(canary))
	p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": name}},
			TuningSpec: v1alpha1.TuningSpec{
				Scheduler:      &v1alpha1.SchedulerSpec{Autogroup: ptr.To(v1alpha1.Disabled)},
				CPUs:           &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("1"), NamespaceSelector: &v1alpha1.NamespaceSelector{}},
				BootParameters: &v1alpha1.BootParametersSpec{Policy: v1alpha1.BootReboot},
				Measurement: &v1alpha1.MeasurementSpec{Interval: &metav1.Duration{Duration: 5 * time.Second},
					NamespaceSelector: &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{"latencytier.io/tier": "true"}}},
			},
			Reboot:  reboot,
			Rollout: ro,
		}}
	if err := e.c.Create(context.Background(), p); err != nil {
		e.t.Fatalf("creating profile: %v", err)
	}
	return p
}

// testRebootRollout is the rollout of the reboot tests: a one-node canary,
// 5s windows (a verdict comes 6s after a move or a boot), and a node that
// stays inconclusive 12s passes (the spare, which never reports).
func testRebootRollout() *v1alpha1.RolloutSpec {
	return &v1alpha1.RolloutSpec{Canary: &v1alpha1.CanarySpec{Nodes: ptr.To(intstr.FromInt32(1))},
		VerificationWindow:  &metav1.Duration{Duration: 5 * time.Second},
		InconclusiveTimeout: &metav1.Duration{Duration: 12 * time.Second}, OnInconclusive: v1alpha1.InconclusivePass}
}

// spare creates a node labelled tier=tier that no agent runs on: it makes
// a one-node test's selection bigger than its canary and is never moved
// (it never reports a baseline within the rollout's inconclusiveTimeout).
func (e *rebootEnv) spare(tier string) {
	e.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: tier + "-zspare", Labels: map[string]string{"tier": tier}}}
	if err := e.c.Create(context.Background(), n); err != nil {
		e.t.Fatal(err)
	}
}

// nodes creates Ready nodes labelled tier=tier.
func (e *rebootEnv) nodes(tier string, names ...string) {
	e.t.Helper()
	for _, name := range names {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": tier}}}
		if err := e.c.Create(context.Background(), n); err != nil {
			e.t.Fatal(err)
		}
		e.sim.add(name)
	}
}

// pod creates a pod bound to node, owned by a ReplicaSet (a pod no
// controller owns blocks the drain); f shapes it.
func (e *rebootEnv) pod(name, node string, f func(*corev1.Pod)) {
	e.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "work", Labels: map[string]string{"app": name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs-" + name, UID: "rs-uid", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if f != nil {
		f(p)
	}
	if err := e.c.Create(context.Background(), p); err != nil {
		e.t.Fatal(err)
	}
	// Running, as its kubelet would say: the Eviction API deletes a
	// Pending pod without asking its PodDisruptionBudget.
	p.Status.Phase = corev1.PodRunning
	if err := e.c.Status().Update(context.Background(), p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *rebootEnv) podExists(name string) bool {
	err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "work", Name: name}, &corev1.Pod{})
	return err == nil
}

func (e *rebootEnv) ln(name string) *v1alpha1.LatencyNode {
	ln := &v1alpha1.LatencyNode{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: name}, ln); err != nil {
		return nil
	}
	return ln
}

func (e *rebootEnv) node(name string) *corev1.Node {
	n := &corev1.Node{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: name}, n); err != nil {
		e.t.Fatalf("getting node %s: %v", name, err)
	}
	return n
}

func (e *rebootEnv) profile(name string) *v1alpha1.LatencyProfile {
	p := &v1alpha1.LatencyProfile{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: name}, p); err != nil {
		e.t.Fatalf("getting profile %s: %v", name, err)
	}
	return p
}

// until polls f until it returns nil.
func (e *rebootEnv) until(what string, f func() error) {
	e.t.Helper()
	deadline := time.Now().Add(rebootWaitFor)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("%s: still not true after %s: %v", what, rebootWaitFor, err)
}

// phaseIs waits for node's reboot record to be in phase ("" none).
func (e *rebootEnv) phaseIs(node string, phase v1alpha1.RebootPhase) {
	e.t.Helper()
	e.until(node+" reboot phase "+string(phase), func() error {
		ln := e.ln(node)
		if ln == nil {
			return fmt.Errorf("no LatencyNode")
		}
		got := v1alpha1.RebootPhase("")
		if ln.Spec.Reboot != nil {
			got = ln.Spec.Reboot.Phase
		}
		if got != phase {
			return fmt.Errorf("phase %q", got)
		}
		return nil
	})
}

// rebootsIs waits for the profile's status.reboots to satisfy f.
func (e *rebootEnv) rebootsIs(profile, what string, f func(*v1alpha1.RebootRolloutStatus) bool) *v1alpha1.RebootRolloutStatus {
	e.t.Helper()
	var st *v1alpha1.RebootRolloutStatus
	e.until(profile+" reboots "+what, func() error {
		st = e.profile(profile).Status.Reboots
		if st == nil || !f(st) {
			return fmt.Errorf("status.reboots = %+v", st)
		}
		return nil
	})
	return st
}

func (e *rebootEnv) expectEvent(reason string) {
	e.t.Helper()
	e.until("event "+reason, func() error {
		var list eventsv1.EventList
		if err := e.c.List(context.Background(), &list); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no %s among %d events", reason, len(list.Items))
	})
}

// standIn plays the kubelet and the agent of its nodes.
type standIn struct {
	t *testing.T
	c client.Client

	mu    sync.Mutex
	nodes []string
	boot  map[string]string // the running boot id
	// staged: the bootloader holds the boot arguments; booted: the
	// running kernel does (what was staged when it booted).
	staged, booted map[string]bool
	// rebootedFor is the agent's on-node record of its last managed
	// reboot. requests counts the manager's reboot requests per node and
	// revision: the stand-in serves every request (one per record, in the
	// boot it was made in) instead of refusing a second one as the real
	// agent does, so a manager that asks twice fails check.
	rebootedFor map[string]string
	requests    map[string]int
	served      map[string]bool // node/revision/since of the requests served
	// down: the node rebooted and never came back (NotReady, silent).
	neverBack, down map[string]bool
	// hold: the agent does not reboot yet (holdFor: not for that
	// node/revision); quiet: it reports nothing yet; stageFails: staging
	// failed; regress: its latency window under a revision (node/revision)
	// regresses (p99 2ms, not 300µs).
	hold, holdFor, quiet, stageFails, regress map[string]bool
	// invalid: the kernel refuses one setting's value (Invalid); the rest
	// is applied.
	invalid map[string]bool
	// late: the agent's pass that read a request while held goes on once
	// released, whatever the record says by then (a pass that read the
	// request before the manager took it back: the real agent asks
	// systemd from what it read); seen is the request it read.
	late map[string]bool
	seen map[string]*v1alpha1.NodeRebootSpec
	// downAs is how a down node's Ready reads ("": False, the kubelet's
	// own NotReady; Unknown: the node lifecycle controller's).
	downAs corev1.ConditionStatus
	window time.Duration
	// Observed: the most nodes cordoned at once, whether each node was
	// ever cordoned, and gate violations (untainted while not Applied in
	// the running boot, after the manager saw that boot).
	maxCordoned int
	cordoned    map[string]bool
	violations  []string
	bootSeq     int
}

func newStandIn(t *testing.T, c client.Client) *standIn {
	s := &standIn{t: t, c: c, boot: map[string]string{}, staged: map[string]bool{}, booted: map[string]bool{},
		rebootedFor: map[string]string{}, requests: map[string]int{}, served: map[string]bool{},
		neverBack: map[string]bool{}, down: map[string]bool{}, hold: map[string]bool{}, holdFor: map[string]bool{},
		late: map[string]bool{}, seen: map[string]*v1alpha1.NodeRebootSpec{}, quiet: map[string]bool{}, stageFails: map[string]bool{},
		regress: map[string]bool{}, window: 5 * time.Second, cordoned: map[string]bool{}, invalid: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			s.pass(ctx)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func (s *standIn) add(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes = append(s.nodes, node)
	s.bootSeq++
	s.boot[node] = fmt.Sprintf("boot-%s-%d", node, s.bootSeq)
}

func (s *standIn) set(f func(s *standIn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *standIn) bootOf(node string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boot[node]
}

func (s *standIn) rebootCount(node, rev string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[node+"/"+rev]
}

func (s *standIn) pass(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.countCordoned(ctx)
	for _, name := range s.nodes {
		n := &corev1.Node{}
		if err := s.c.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
			continue
		}
		s.kubelet(ctx, n)
		s.removeTerminated(ctx, name)
		if !s.down[name] && !s.quiet[name] {
			s.agent(ctx, n)
		}
	}
}

// countCordoned counts the stand-in's nodes cordoned at one instant: one
// List is one resourceVersion of every node. Counting node by node, with
// this pass's kubelet and agent writes between the reads, saw a node
// uncordoned after its reboot and, a few writes later, the next node
// cordoned as if both were cordoned at once (TestRebootLimitHoldsAcrossProfiles
// failed so under load with the budget kept).
func (s *standIn) countCordoned(ctx context.Context) {
	var list corev1.NodeList
	if err := s.c.List(ctx, &list); err != nil {
		return
	}
	ours := map[string]bool{}
	for _, name := range s.nodes {
		ours[name] = true
	}
	cordoned := 0
	for _, n := range list.Items {
		if ours[n.Name] && n.Spec.Unschedulable {
			cordoned++
			s.cordoned[n.Name] = true
		}
	}
	if cordoned > s.maxCordoned {
		s.maxCordoned = cordoned
	}
}

// kubelet keeps the node's Ready condition and boot id.
func (s *standIn) kubelet(ctx context.Context, n *corev1.Node) {
	ready := corev1.ConditionTrue
	if s.down[n.Name] {
		ready = corev1.ConditionFalse
		if s.downAs != "" {
			ready = s.downAs
		}
	}
	want := n.DeepCopy()
	want.Status.NodeInfo.BootID = s.boot[n.Name]
	want.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "StandIn",
		LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}}
	if readyStatus(n) == ready && n.Status.NodeInfo.BootID == want.Status.NodeInfo.BootID {
		return
	}
	if ready == corev1.ConditionTrue {
		s.schedulable(ctx, n, want)
	}
	_ = s.c.Status().Update(ctx, want)
}

// schedulable records a gate violation when the kubelet is about to report
// the node Ready (in a new boot, or after NotReady) while the scheduler
// could place a pod there (neither cordoned nor tainted) and its agent has
// not reported the tuning Applied in that boot.
func (s *standIn) schedulable(ctx context.Context, n, ready *corev1.Node) {
	ln := &v1alpha1.LatencyNode{}
	if err := s.c.Get(ctx, types.NamespacedName{Name: n.Name}, ln); err != nil || ln.Spec.Action != v1alpha1.ActionApply {
		return
	}
	if !n.Spec.Unschedulable && !hasTaint(n.Spec.Taints, pendingTaint) && !appliedThisBoot(ready, ln) {
		s.violations = append(s.violations, fmt.Sprintf("%s Ready in boot %s, schedulable and untainted before its tuning was Applied in it",
			n.Name, ready.Status.NodeInfo.BootID))
	}
}

// rebootUnplanned is a reboot nobody asked for: a new boot, the running
// kernel with what the bootloader held.
func (s *standIn) rebootUnplanned(node string) {
	s.bootSeq++
	s.boot[node] = fmt.Sprintf("boot-%s-%d", node, s.bootSeq)
	s.booted[node] = s.staged[node]
}

// removeTerminated finishes the pods an eviction deleted (the kubelet's
// part of a graceful deletion).
func (s *standIn) removeTerminated(ctx context.Context, node string) {
	var pods corev1.PodList
	if err := s.c.List(ctx, &pods); err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == node && !p.DeletionTimestamp.IsZero() {
			_ = s.c.Delete(ctx, p, client.GracePeriodSeconds(0))
		}
	}
}

// agent reports the node's tuning, latency and boot, and reboots when
// asked.
func (s *standIn) agent(ctx context.Context, n *corev1.Node) {
	if seen := s.seen[n.Name]; s.late[n.Name] && seen != nil && !s.hold[n.Name] && !s.holdFor[n.Name+"/"+seen.Revision] {
		// The pass that read the request goes on, whatever the record,
		// or the LatencyNode, says by now.
		s.serve(n, seen)
		return
	}
	ln := &v1alpha1.LatencyNode{}
	if err := s.c.Get(ctx, types.NamespacedName{Name: n.Name}, ln); err != nil || ln.Spec.Action == "" {
		return
	}
	apply := ln.Spec.Action == v1alpha1.ActionApply
	wants := apply && ln.Spec.Tuning.BootParameters != nil && ln.Spec.Tuning.BootParameters.Policy == v1alpha1.BootReboot
	// Staging (or taking the drop-in out) is what the agent's pass does
	// before it reports.
	s.staged[n.Name] = wants && !s.stageFails[n.Name]
	if rec := ln.Spec.Reboot; rec != nil && rec.Phase == v1alpha1.RebootRequested {
		if s.hold[n.Name] || s.holdFor[n.Name+"/"+rec.Revision] {
			s.seen[n.Name] = rec.DeepCopy()
		} else if s.serve(n, rec) {
			return // the kubelet reports the new boot on the next pass
		}
	}
	if n.Status.NodeInfo.BootID != s.boot[n.Name] {
		return
	}
	// Gate: the agent takes its time in a new boot, at least until the
	// manager has put the taint back; the taint must be there whenever
	// the report does not say Applied in this boot.
	tainted := hasTaint(n.Spec.Taints, pendingTaint)
	if apply && !tainted && !tunedThisBoot(n, ln) && ln.Status.Boot != nil && ln.Status.Boot.BootID != s.boot[n.Name] {
		return // wait for the manager to see the new boot
	}
	if apply && !tainted && !appliedThisBoot(n, ln) && ln.Status.ObservedGeneration > 0 {
		s.violations = append(s.violations, fmt.Sprintf("%s untainted while not Applied in boot %s", n.Name, s.boot[n.Name]))
	}
	st := ln.Status.DeepCopy()
	st.ObservedGeneration, st.Profile, st.ProfileGeneration = ln.Generation, ln.Spec.Profile, ln.Spec.ProfileGeneration
	cond := metav1.Condition{Type: v1alpha1.NodeApplied, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied, ObservedGeneration: ln.Generation}
	if ln.Spec.Action == v1alpha1.ActionRevert {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.NodeApplied)
		cond = metav1.Condition{Type: v1alpha1.NodeReverted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRevertComplete, ObservedGeneration: ln.Generation}
	}
	st.Settings = nil
	if s.invalid[n.Name] && ln.Spec.Action == v1alpha1.ActionApply {
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonPartiallyApplied
		cond.Message = "1 applied, 0 unsupported, 0 immovable; not applied: sysctl/net.core.busy_poll (Invalid)"
		st.Settings = []v1alpha1.SettingResult{{Setting: "sysctl/net.core.busy_poll", Desired: "-1", State: v1alpha1.SettingInvalid, Message: "EINVAL"},
			{Setting: "scheduler/autogroup", Desired: "0", Actual: "0", State: v1alpha1.SettingApplied}}
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	st.Boot = s.bootStatus(n.Name, wants)
	s.evidence(ln, st)
	if equality.Semantic.DeepEqual(&ln.Status, st) {
		return
	}
	patched := ln.DeepCopy()
	patched.Status = *st
	_ = s.c.Status().Patch(ctx, patched, client.MergeFrom(ln))
}

// serve reboots n for the request rec, once per request (node, revision,
// boot, since) and only from the boot it was made in.
func (s *standIn) serve(n *corev1.Node, rec *v1alpha1.NodeRebootSpec) bool {
	key := n.Name + "/" + rec.Revision + "/" + rec.BootID + "/" + rec.Since.UTC().Format(time.RFC3339Nano)
	if s.served[key] || (rec.BootID != "" && rec.BootID != s.boot[n.Name]) {
		return false
	}
	s.served[key] = true
	delete(s.seen, n.Name)
	if !n.Spec.Unschedulable {
		s.violations = append(s.violations, fmt.Sprintf("%s asked to reboot for %s while not cordoned", n.Name, rec.Revision))
	}
	s.requests[n.Name+"/"+rec.Revision]++
	s.rebootedFor[n.Name] = rec.Revision
	s.bootSeq++
	s.boot[n.Name] = fmt.Sprintf("boot-%s-%d", n.Name, s.bootSeq)
	s.booted[n.Name] = s.staged[n.Name]
	if s.neverBack[n.Name] {
		s.down[n.Name] = true
	}
	return true
}

// bootStatus is what the agent reports of the node's boot arguments: a
// spec that wants them has them Staged, then Booted; one that does not
// while the running kernel holds them has them Unstaged.
func (s *standIn) bootStatus(node string, wants bool) *v1alpha1.BootStatus {
	b := &v1alpha1.BootStatus{State: v1alpha1.BootNotNeeded, Backend: "GRUB", BootID: s.boot[node], RebootedFor: s.rebootedFor[node]}
	args := []v1alpha1.BootArgument{{Argument: "nohz_full=1", Present: s.booted[node]}}
	switch {
	case wants && s.stageFails[node]:
		b.State, b.Message = v1alpha1.BootFailed, "update-grub failed"
	case wants && s.booted[node]:
		b.State, b.Arguments = v1alpha1.BootBooted, args
	case wants:
		b.State, b.Arguments = v1alpha1.BootStaged, args
	case s.booted[node]:
		b.State, b.Arguments = v1alpha1.BootUnstaged, args
	}
	return b
}

// evidence reports latency windows as the API documents them
// (LatencyEvidence, as simAgents does): on a new (action, revision) the
// last window becomes the baseline; a window under the spec ends one
// window after the revision was set (a reboot's Verifying sets it again).
// p99 is 400µs untuned, 300µs tuned, 2ms where regress says so.
func (s *standIn) evidence(ln *v1alpha1.LatencyNode, st *v1alpha1.LatencyNodeStatus) {
	setAt, err := time.Parse(time.RFC3339, ln.Annotations[v1alpha1.RevisionSetAtAnnotation])
	if err != nil {
		setAt = ln.CreationTimestamp.Time
	}
	end := metav1.NewTime(setAt.Add(s.window + time.Second))
	cur := st.Current
	if cur != nil && cur.Action == ln.Spec.Action && cur.Revision == ln.Spec.Revision && !cur.MeasuredAt.Before(&end) {
		return
	}
	if cur != nil && (cur.Action != ln.Spec.Action || cur.Revision != ln.Spec.Revision) {
		st.Baseline = cur
	}
	p99 := 400 * time.Microsecond
	switch {
	case s.regress[ln.Name+"/"+ln.Spec.Revision]:
		p99 = 2 * time.Millisecond
	case ln.Spec.Action == v1alpha1.ActionApply:
		p99 = 300 * time.Microsecond
	}
	st.Current = &v1alpha1.LatencyEvidence{Action: ln.Spec.Action, Revision: ln.Spec.Revision,
		Window: &metav1.Duration{Duration: s.window}, MeasuredAt: end,
		RunQueue: v1alpha1.LatencySummary{Samples: 5000, P99: &metav1.Duration{Duration: p99}}}
}

// finish checks what must hold all along.
func (s *standIn) check(maxCordoned int) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maxCordoned > maxCordoned {
		s.t.Errorf("%d nodes cordoned at once, at most %d allowed", s.maxCordoned, maxCordoned)
	}
	for k, n := range s.requests {
		if n > 1 {
			s.t.Errorf("%s: the manager asked for %d reboots for one revision", k, n)
		}
	}
	for _, v := range s.violations {
		s.t.Errorf("violated: %s", v)
	}
}

// TestRebootsOneAtATimeDrainedAndTaintedUntilApplied: three staged nodes
// under --max-rebooting 1 are cordoned one at a time, drained (their
// DaemonSet and mirror pods stay; one that tolerates the tuning-pending
// taint is evicted like any other), rebooted once each,
// verified and uncordoned; each keeps the tuning-pending taint until its
// agent reports Applied in the new boot, and loses it after.
func TestRebootsOneAtATimeDrainedAndTaintedUntilApplied(t *testing.T) {
	e := startRebootEnv(t, 1)
	nodes := []string{"rb-a", "rb-b", "rb-c"}
	e.nodes("fleet", nodes...)
	isController := true
	for _, n := range nodes {
		e.pod("web-"+n, n, nil)
		e.pod("ds-"+n, n, func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u1", Controller: &isController}}
		})
		e.pod("critical-"+n, n, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: v1alpha1.TuningPendingTaint, Operator: corev1.TolerationOpExists}}
		})
		e.pod("mirror-"+n, n, func(p *corev1.Pod) { p.Annotations = map[string]string{executor.MirrorPodAnnotation: "x"} })
	}
	// Selected: the taint is on before anything is reported.
	e.sim.set(func(s *standIn) { s.quiet["rb-a"], s.quiet["rb-b"], s.quiet["rb-c"] = true, true, true })
	e.rebootProfile("fleet", nil)
	for _, n := range nodes {
		e.until(n+" tainted on selection", func() error {
			if !hasTaint(e.node(n).Spec.Taints, pendingTaint) {
				return fmt.Errorf("taints %v", e.node(n).Spec.Taints)
			}
			return nil
		})
	}
	e.sim.set(func(s *standIn) { s.quiet = map[string]bool{} })
	st := e.rebootsIs("fleet", "all rebooted", func(st *v1alpha1.RebootRolloutStatus) bool {
		return st.Rebooted == 3 && st.Draining+st.Rebooting+st.Verifying == 0
	})
	if st.Paused || st.Pending != 0 {
		t.Errorf("status.reboots = %+v", st)
	}
	// Nothing is in flight, so nothing is waited for (the message of an
	// earlier pass, "waiting for the reboot of rb-a", was carried on).
	if st.Message != "" {
		t.Errorf("status.reboots.message = %q with every reboot done", st.Message)
	}
	rev := e.ln("rb-a").Spec.Revision
	for _, n := range nodes {
		if got := e.sim.rebootCount(n, rev); got != 1 {
			t.Errorf("%s rebooted %d times for %s, want 1", n, got, rev)
		}
		e.until(n+" uncordoned and untainted", func() error {
			node := e.node(n)
			if node.Spec.Unschedulable || hasTaint(node.Spec.Taints, pendingTaint) {
				return fmt.Errorf("unschedulable %v taints %v", node.Spec.Unschedulable, node.Spec.Taints)
			}
			return nil
		})
		for _, goes := range []string{"web-", "critical-"} {
			if e.podExists(goes + n) {
				t.Errorf("%s%s was not evicted", goes, n)
			}
		}
		for _, stays := range []string{"ds-", "mirror-"} {
			if !e.podExists(stays + n) {
				t.Errorf("%s%s was evicted", stays, n)
			}
		}
		if ln := e.ln(n); ln.Spec.Reboot != nil || ln.Status.Boot.RebootedFor != rev {
			t.Errorf("%s: record %+v, rebootedFor %q", n, ln.Spec.Reboot, ln.Status.Boot.RebootedFor)
		}
	}
	e.expectEvent(eventRebootDone)
	e.sim.check(1)
}

// TestInvalidSettingLiftsTheTaintAndRebootGoesOn: every node's agent
// reports one setting Invalid (the kernel refused its value) and the rest
// applied. The taint still comes off (issue 40: it never did, so the tier
// had no node), with an event naming the setting, the profile says
// Degraded, and a staged node's reboot is verified and uncordoned.
func TestInvalidSettingLiftsTheTaintAndRebootGoesOn(t *testing.T) {
	e := startRebootEnv(t, 1)
	nodes := []string{"inv-a", "inv-b"}
	e.nodes("inv", nodes...)
	e.sim.set(func(s *standIn) { s.invalid["inv-a"], s.invalid["inv-b"] = true, true })
	p := e.rebootProfile("inv", nil)
	rev := currentRevision(p)
	e.until("inv-a rebooted, uncordoned and untainted", func() error {
		n, ln := e.node("inv-a"), e.ln("inv-a")
		if ln == nil || ln.Status.Boot == nil || ln.Status.Boot.RebootedFor != rev || ln.Spec.Reboot != nil {
			return fmt.Errorf("LatencyNode %+v", ln)
		}
		if n.Spec.Unschedulable || hasTaint(n.Spec.Taints, pendingTaint) {
			return fmt.Errorf("unschedulable %v taints %v", n.Spec.Unschedulable, n.Spec.Taints)
		}
		return nil
	})
	e.expectEvent(eventTaintLiftedDegraded)
	e.until("profile Degraded", func() error {
		if c := meta.FindStatusCondition(e.profile("inv").Status.Conditions, v1alpha1.ProfileDegraded); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Degraded %+v", c)
		}
		return nil
	})
	e.sim.check(1)
}

// TestRebootDrainHonoursPDBAndTimesOut: an eviction a PodDisruptionBudget
// refuses delays the drain (the node stays cordoned, Draining) until the
// budget allows it; a drain that outlasts drainTimeout uncordons the node
// unrebooted and pauses the reboots.
func TestRebootDrainHonoursPDBAndTimesOut(t *testing.T) {
	e := startRebootEnv(t, 1)
	e.nodes("pdb", "pdb-a", "pdb-b")
	e.pod("db-a", "pdb-a", nil)
	e.pod("db-b", "pdb-b", nil)
	ctx := context.Background()
	pdb := func(name string) *policyv1.PodDisruptionBudget {
		b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "work"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
		if err := e.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	// No kube-controller-manager: the test writes what its disruption
	// controller would.
	allow := func(b *policyv1.PodDisruptionBudget, n int32) {
		e.until("PDB status written", func() error {
			cur := &policyv1.PodDisruptionBudget{}
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
				return err
			}
			cur.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: cur.Generation, DisruptionsAllowed: n,
				CurrentHealthy: 1, DesiredHealthy: 1 - n + 1, ExpectedPods: 1}
			return e.c.Status().Update(ctx, cur)
		})
	}
	allow(pdb("db-a"), 0)
	allow(pdb("db-b"), 0)
	e.rebootProfile("pdb", &v1alpha1.RebootSpec{DrainTimeout: &metav1.Duration{Duration: time.Minute}})

	// Whichever node is staged first goes first; both budgets refuse.
	var a string
	e.until("one node draining", func() error {
		for _, n := range []string{"pdb-a", "pdb-b"} {
			if ln := e.ln(n); ln != nil && ln.Spec.Reboot != nil && ln.Spec.Reboot.Phase == v1alpha1.RebootDraining {
				a = n
				return nil
			}
		}
		return fmt.Errorf("neither node draining")
	})
	b := map[string]string{"pdb-a": "pdb-b", "pdb-b": "pdb-a"}[a]
	podOf := func(node string) string { return "db-" + strings.TrimPrefix(node, "pdb-") }
	e.phaseIs(a, v1alpha1.RebootDraining)
	e.expectEvent(eventRebootBlocked)
	if !e.node(a).Spec.Unschedulable || !e.podExists(podOf(a)) {
		t.Fatalf("%s: not cordoned, or its pod went despite the budget", a)
	}
	allow(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: podOf(a), Namespace: "work"}}, 1)
	e.phaseIs(a, "")
	rev := e.ln(a).Spec.Revision
	if e.sim.rebootCount(a, rev) != 1 || e.podExists(podOf(a)) {
		t.Fatalf("%s: rebooted %d times, pod still there %v", a, e.sim.rebootCount(a, rev), e.podExists(podOf(a)))
	}

	// The other's budget never allows: past drainTimeout it is let go.
	e.phaseIs(b, v1alpha1.RebootDraining)
	e.clock.advance(2 * time.Minute)
	st := e.rebootsIs("pdb", "paused", func(st *v1alpha1.RebootRolloutStatus) bool { return st.Paused })
	e.phaseIs(b, "")
	if n := e.node(b); n.Spec.Unschedulable {
		t.Errorf("%s still cordoned after its drain timed out", b)
	}
	if e.sim.rebootCount(b, rev) != 0 || !e.podExists(podOf(b)) {
		t.Errorf("%s rebooted or drained despite its budget", b)
	}
	t.Logf("paused: %s", st.Message)
	e.expectEvent(eventRebootPaused)
	// Paused stays paused: b is not cordoned again.
	time.Sleep(time.Second)
	if e.ln(b).Spec.Reboot != nil {
		t.Errorf("a paused profile started %s again", b)
	}
	e.sim.check(1)
}

// TestRebootNeverBackPausesAndStagingFailureNeverCordons: a node that does
// not come back within bootTimeout pauses the reboots and stays cordoned;
// a node whose staging failed is never cordoned.
func TestRebootNeverBackPausesAndStagingFailureNeverCordons(t *testing.T) {
	e := startRebootEnv(t, 2)
	e.nodes("lost", "lost-a", "lost-b")
	e.spare("lost")
	e.sim.set(func(s *standIn) { s.neverBack["lost-a"], s.stageFails["lost-b"] = true, true })
	e.rebootProfileCanary("lost", nil, 2) // both are canaries, moved at once
	e.phaseIs("lost-a", v1alpha1.RebootRequested)
	e.until("lost-a down", func() error {
		if readyStatus(e.node("lost-a")) != corev1.ConditionFalse {
			return fmt.Errorf("still Ready")
		}
		return nil
	})
	e.clock.advance(16 * time.Minute)
	st := e.rebootsIs("lost", "paused", func(st *v1alpha1.RebootRolloutStatus) bool { return st.Paused })
	t.Logf("paused: %s", st.Message)
	if !e.node("lost-a").Spec.Unschedulable || e.ln("lost-a").Spec.Reboot == nil {
		t.Error("lost-a was let go: it must stay cordoned for a person to look at")
	}
	if ln := e.ln("lost-b"); ln.Status.Boot == nil || ln.Status.Boot.State != v1alpha1.BootFailed {
		t.Fatalf("lost-b did not report its staging failure: %+v", ln.Status.Boot)
	}
	e.sim.mu.Lock()
	cordonedB := e.sim.cordoned["lost-b"]
	e.sim.mu.Unlock()
	if cordonedB || e.ln("lost-b").Spec.Reboot != nil {
		t.Error("lost-b was cordoned although its staging failed")
	}
	e.sim.check(2)
}

// TestRebootResumesAfterManagerRestart: the manager stops while a node is
// rebooting; the node reboots meanwhile; a new manager picks the record up,
// verifies and uncordons it without asking for another reboot, and goes
// on to the next node.
func TestRebootResumesAfterManagerRestart(t *testing.T) {
	e := startRebootEnv(t, 1)
	e.nodes("again", "again-a", "again-b")
	e.sim.set(func(s *standIn) { s.hold["again-a"], s.hold["again-b"] = true, true })
	e.rebootProfile("again", nil)
	e.until("one node asked to reboot", func() error {
		for _, n := range []string{"again-a", "again-b"} {
			if ln := e.ln(n); ln != nil && ln.Spec.Reboot != nil && ln.Spec.Reboot.Phase == v1alpha1.RebootRequested {
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	e.stop()
	first, second := "again-a", "again-b"
	if e.ln(first).Spec.Reboot == nil {
		first, second = second, first
	}
	if e.ln(second).Spec.Reboot != nil {
		t.Fatalf("both nodes in flight under --max-rebooting 1")
	}
	// The node reboots while no manager runs.
	e.sim.set(func(s *standIn) { s.hold = map[string]bool{} })
	rev := e.ln(first).Spec.Revision
	e.until(first+" rebooted", func() error {
		if e.sim.rebootCount(first, rev) != 1 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	e.startManager(1)
	e.rebootsIs("again", "both rebooted", func(st *v1alpha1.RebootRolloutStatus) bool {
		return st.Rebooted == 2 && st.Draining+st.Rebooting+st.Verifying == 0
	})
	for _, n := range []string{first, second} {
		if got := e.sim.rebootCount(n, rev); got != 1 {
			t.Errorf("%s rebooted %d times, want 1", n, got)
		}
		if e.node(n).Spec.Unschedulable {
			t.Errorf("%s still cordoned", n)
		}
	}
	e.sim.check(1)
}

// TestRebootResumesDrainingAfterManagerRestart: the manager stops while a
// node is Draining (a PodDisruptionBudget holds its pod); meanwhile the pod
// goes and the node is uncordoned, as when the manager died between its
// Draining record and the cordon, or a person ran kubectl uncordon. The new
// manager reads the record back, cordons the node again before asking for
// the reboot, reboots it once, and holds --max-rebooting 1 for the other
// node all along.
func TestRebootResumesDrainingAfterManagerRestart(t *testing.T) {
	e := startRebootEnv(t, 1)
	e.nodes("drn", "drn-a", "drn-b")
	ctx := context.Background()
	for _, n := range []string{"drn-a", "drn-b"} {
		e.pod("db-"+n, n, nil)
		b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "db-" + n, Namespace: "work"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db-" + n}}}}
		if err := e.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		// What the disruption controller (not running here) would write.
		e.until("PDB status written", func() error {
			cur := &policyv1.PodDisruptionBudget{}
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
				return err
			}
			cur.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: cur.Generation, CurrentHealthy: 1, DesiredHealthy: 2, ExpectedPods: 1}
			return e.c.Status().Update(ctx, cur)
		})
	}
	e.rebootProfile("drn", nil)
	var first string
	e.until("one node draining", func() error {
		for _, n := range []string{"drn-a", "drn-b"} {
			if ln := e.ln(n); ln != nil && ln.Spec.Reboot != nil && ln.Spec.Reboot.Phase == v1alpha1.RebootDraining {
				first = n
				return nil
			}
		}
		return fmt.Errorf("neither node draining")
	})
	e.expectEvent(eventRebootBlocked)
	e.stop()
	second := map[string]string{"drn-a": "drn-b", "drn-b": "drn-a"}[first]
	if e.ln(second).Spec.Reboot != nil {
		t.Fatal("both nodes in flight under --max-rebooting 1")
	}
	// While no manager runs: the pod goes, the node is uncordoned.
	if err := e.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-" + first, Namespace: "work"}}, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	e.until(first+" uncordoned by hand", func() error {
		n := e.node(first)
		n.Spec.Unschedulable = false
		return e.c.Update(ctx, n)
	})
	rev := e.ln(first).Spec.Revision
	// The second node's budget lets its pod go once the first is done.
	if err := e.c.Delete(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "db-" + second, Namespace: "work"}}); err != nil {
		t.Fatal(err)
	}
	e.startManager(1)
	e.rebootsIs("drn", "both rebooted", func(st *v1alpha1.RebootRolloutStatus) bool {
		return st.Rebooted == 2 && st.Draining+st.Rebooting+st.Verifying == 0
	})
	for _, n := range []string{first, second} {
		if got := e.sim.rebootCount(n, rev); got != 1 {
			t.Errorf("%s rebooted %d times for %s, want 1", n, got, rev)
		}
		if e.node(n).Spec.Unschedulable {
			t.Errorf("%s still cordoned", n)
		}
	}
	e.sim.check(1)
}

// TestUnplannedRebootTaintedBeforeReady: a tuned, untainted node reboots
// on its own (no reboot record: a kernel update, a person's reboot). Its
// kubelet first reports NotReady in the old boot (graceful node shutdown
// before an orderly reboot; the node lifecycle controller's Unknown for a
// silent one), then, in the new boot, Ready at once, before the agent runs.
// The tuning-pending taint must be on by then, so no pod of the tier lands
// on the untuned node, and come off once the agent reports Applied in the
// new boot.
func TestUnplannedRebootTaintedBeforeReady(t *testing.T) {
	e := startRebootEnv(t, 1)
	e.nodes("up", "up-a")
	e.spare("up")
	ctx := context.Background()
	p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "up"},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "up"}},
			TuningSpec:   v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{Autogroup: ptr.To(v1alpha1.Disabled)}},
		}}
	if err := e.c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	untainted := func(what string) {
		t.Helper()
		e.until("up-a untainted "+what, func() error {
			ln := e.ln("up-a")
			if n := e.node("up-a"); ln == nil || hasTaint(n.Spec.Taints, pendingTaint) || !appliedThisBoot(n, ln) {
				return fmt.Errorf("taints %v", n.Spec.Taints)
			}
			return nil
		})
	}
	untainted("once Applied")
	for _, down := range []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionUnknown} {
		// Going down: the agent stops, the kubelet reports down.
		e.sim.set(func(s *standIn) { s.quiet["up-a"], s.down["up-a"], s.downAs = true, true, down })
		e.until("up-a reported "+string(down), func() error {
			if got := readyStatus(e.node("up-a")); got != down {
				return fmt.Errorf("Ready %q", got)
			}
			return nil
		})
		time.Sleep(time.Second) // the reboot itself
		// The new boot: Ready before the agent's first report in it.
		e.sim.set(func(s *standIn) { s.rebootUnplanned("up-a"); s.down["up-a"] = false })
		e.until("up-a Ready in its new boot", func() error {
			if n := e.node("up-a"); readyStatus(n) != corev1.ConditionTrue || n.Status.NodeInfo.BootID != e.sim.bootOf("up-a") {
				return fmt.Errorf("Ready %q boot %s", readyStatus(n), n.Status.NodeInfo.BootID)
			}
			return nil
		})
		if !hasTaint(e.node("up-a").Spec.Taints, pendingTaint) {
			t.Errorf("down %s: up-a Ready in its new boot without the taint, its agent silent", down)
		}
		e.sim.set(func(s *standIn) { s.quiet["up-a"] = false })
		untainted("after Applied in the new boot (down " + string(down) + ")")
	}
	if e.ln("up-a").Spec.Reboot != nil || e.node("up-a").Spec.Unschedulable {
		t.Error("an unplanned reboot became a managed one")
	}
	e.sim.check(0)
}

// TestRebootDeselectedWhileDrainingIsLetGo: a node that leaves the
// profile's selection while it is Draining (a PodDisruptionBudget holds its
// pod) is not rebooted: its agent takes the staged arguments out of the
// bootloader (Revert), the node is uncordoned, and it is released (no
// LatencyNode, no taint); the budget it held goes to the next node.
func TestRebootDeselectedWhileDrainingIsLetGo(t *testing.T) {
	e := startRebootEnv(t, 1)
	nodes := []string{"dsl-a", "dsl-b"}
	e.nodes("dsl", nodes...)
	// The selection stays bigger than the canary once the first leaves.
	e.spare("dsl")
	ctx := context.Background()
	for _, n := range nodes {
		e.pod("db-"+n, n, nil)
		b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "db-" + n, Namespace: "work"},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db-" + n}}}}
		if err := e.c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		e.until("PDB status written", func() error {
			cur := &policyv1.PodDisruptionBudget{}
			if err := e.c.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
				return err
			}
			cur.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: cur.Generation, CurrentHealthy: 1, DesiredHealthy: 2, ExpectedPods: 1}
			return e.c.Status().Update(ctx, cur)
		})
	}
	e.rebootProfile("dsl", nil)
	var first string
	e.until("one node draining", func() error {
		for _, n := range nodes {
			if ln := e.ln(n); ln != nil && ln.Spec.Reboot != nil && ln.Spec.Reboot.Phase == v1alpha1.RebootDraining {
				first = n
				return nil
			}
		}
		return fmt.Errorf("neither node draining")
	})
	second := map[string]string{"dsl-a": "dsl-b", "dsl-b": "dsl-a"}[first]
	e.expectEvent(eventRebootBlocked)
	rev := e.ln(first).Spec.Revision
	// The second node's budget lets its pod go once the first is let go.
	if err := e.c.Delete(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "db-" + second, Namespace: "work"}}); err != nil {
		t.Fatal(err)
	}
	e.until(first+" deselected", func() error {
		n := e.node(first)
		delete(n.Labels, "tier")
		return e.c.Update(ctx, n)
	})
	e.until(first+" released and uncordoned", func() error {
		n := e.node(first)
		if e.ln(first) != nil || n.Spec.Unschedulable || hasTaint(n.Spec.Taints, pendingTaint) {
			return fmt.Errorf("LatencyNode %v, unschedulable %v, taints %v", e.ln(first) != nil, n.Spec.Unschedulable, n.Spec.Taints)
		}
		return nil
	})
	e.rebootsIs("dsl", second+" rebooted", func(st *v1alpha1.RebootRolloutStatus) bool {
		return st.Rebooted == 1 && st.Draining+st.Rebooting+st.Verifying == 0
	})
	e.sim.mu.Lock()
	stagedFirst := e.sim.staged[first]
	e.sim.mu.Unlock()
	if got := e.sim.rebootCount(first, rev); got != 0 || stagedFirst {
		t.Errorf("%s, deselected mid-drain: rebooted %d times, arguments still staged %v", first, got, stagedFirst)
	}
	if !e.podExists("db-" + first) {
		t.Errorf("%s's pod was evicted despite its budget", first)
	}
	if got := e.sim.rebootCount(second, rev); got != 1 {
		t.Errorf("%s rebooted %d times, want 1", second, got)
	}
	e.sim.check(1)
}

// TestRebootBackAfterRegressedRollback: a rollout of a revision that adds
// isolation and boot parameters (policy Reboot) to one that had none
// reboots the node into the arguments; its latency after the boot
// regresses, the rollout rolls it back, and the node, whose kernel still
// holds the arguments (Unstaged), is rebooted a second time, once, and
// comes back without them, uncordoned and untainted once Applied.
func TestRebootBackAfterRegressedRollback(t *testing.T) {
	e := startRebootEnv(t, 1)
	e.nodes("back", "back-a")
	e.spare("back")
	r1, r2 := e.regressedRollout("back", "back-a", false)
	if got := e.sim.rebootCount("back-a", r2); got != 1 {
		t.Fatalf("back-a rebooted %d times for %s before its verdict, want 1", got, r2)
	}
	e.until("back-a rebooted back without the arguments", func() error {
		ln := e.ln("back-a")
		if b := ln.Status.Boot; ln.Spec.Revision != r1 || ln.Spec.Reboot != nil || b == nil ||
			b.State != v1alpha1.BootNotNeeded || b.RebootedFor != backRevision(r2) {
			return fmt.Errorf("revision %s, record %+v, boot %+v", ln.Spec.Revision, ln.Spec.Reboot, b)
		}
		if n := e.node("back-a"); n.Spec.Unschedulable || hasTaint(n.Spec.Taints, pendingTaint) {
			return fmt.Errorf("unschedulable %v taints %v", n.Spec.Unschedulable, n.Spec.Taints)
		}
		return nil
	})
	if got := e.sim.rebootCount("back-a", backRevision(r2)); got != 1 {
		t.Errorf("back-a rebooted back %d times, want 1", got)
	}
	st := e.rebootsIs("back", "the reboot back counted", func(st *v1alpha1.RebootRolloutStatus) bool {
		return st.Rebooted == 1 && st.Draining+st.Rebooting+st.Verifying+st.Pending == 0
	})
	if st.Paused {
		t.Errorf("status.reboots = %+v", st)
	}
	// Once back, never again: no third reboot while the rollback holds.
	time.Sleep(2 * time.Second)
	if ln := e.ln("back-a"); ln.Spec.Reboot != nil {
		t.Errorf("a third reboot started: %+v", ln.Spec.Reboot)
	}
	e.expectEvent(eventRebootDone)
	e.sim.check(1)
}

// regressedRollout creates profile name over the node tier=name, rolls out
// r1 (no boot parameters) and then r2 (CPU 1 isolated, boot parameters
// under policy Reboot) whose latency on node regresses after its reboot,
// and waits for the rollout to roll r2 back. holdBack: the node's agent
// does not reboot back (for r2's back revision) until the test lets it.
func (e *rebootEnv) regressedRollout(name, node string, holdBack bool) (r1, r2 string) {
	e.t.Helper()
	ctx := context.Background()
	p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": name}},
			TuningSpec: v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{Autogroup: ptr.To(v1alpha1.Disabled)},
				Measurement: &v1alpha1.MeasurementSpec{Interval: &metav1.Duration{Duration: 5 * time.Second},
					NamespaceSelector: &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{"latencytier.io/tier": "true"}}}},
			Rollout: testRebootRollout(),
		}}
	if err := e.c.Create(ctx, p); err != nil {
		e.t.Fatal(err)
	}
	r1 = currentRevision(p)
	rollout := func(what string, f func(*v1alpha1.RolloutStatus) bool) {
		e.t.Helper()
		e.until("rollout "+what, func() error {
			if ro := e.profile(name).Status.Rollout; ro == nil || !f(ro) {
				return fmt.Errorf("status.rollout = %+v", ro)
			}
			return nil
		})
	}
	rollout(r1+" complete", func(ro *v1alpha1.RolloutStatus) bool {
		return ro.Revision == r1 && ro.Phase == v1alpha1.RolloutComplete
	})
	withBoot := func(p *v1alpha1.LatencyProfile) {
		p.Spec.CPUs = &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("1"), NamespaceSelector: &v1alpha1.NamespaceSelector{}}
		p.Spec.BootParameters = &v1alpha1.BootParametersSpec{Policy: v1alpha1.BootReboot}
	}
	next := p.DeepCopy()
	withBoot(next)
	r2 = currentRevision(next)
	e.sim.set(func(s *standIn) {
		s.regress[node+"/"+r2] = true
		s.holdFor[node+"/"+backRevision(r2)] = holdBack
	})
	e.until("profile updated to "+r2, func() error {
		cur := e.profile(name)
		withBoot(cur)
		return e.c.Update(ctx, cur)
	})
	rollout(r2+" rolled back", func(ro *v1alpha1.RolloutStatus) bool {
		return ro.Revision == r2 && ro.Phase == v1alpha1.RolloutRolledBack
	})
	// The reboot back waits for a person: paused, the node named, no
	// record written, until the profile carries the go-ahead for r2.
	st := e.rebootsIs(name, "the reboot back waiting for a person", func(st *v1alpha1.RebootRolloutStatus) bool {
		return st.Paused && strings.HasPrefix(st.Message, backWaitPrefix)
	})
	if !strings.Contains(st.Message, node) {
		e.t.Errorf("status.reboots.message %q does not name %s", st.Message, node)
	}
	time.Sleep(time.Second)
	if ln := e.ln(node); ln.Spec.Reboot != nil {
		e.t.Fatalf("the reboot back started without a go-ahead: %+v", ln.Spec.Reboot)
	}
	e.until("go-ahead for "+r2, func() error {
		cur := e.profile(name)
		cur.Annotations = map[string]string{v1alpha1.RebootBackAnnotation: r2}
		return e.c.Update(ctx, cur)
	})
	return r1, r2
}

// TestRebootLimitHoldsAcrossProfiles: --max-rebooting 1 holds for two
// profiles staged at once: never more than one node cordoned, each node
// asked once.
func TestRebootLimitHoldsAcrossProfiles(t *testing.T) {
	e := startRebootEnv(t, 1)
	e.nodes("lim-a", "lim-a1", "lim-a2")
	e.nodes("lim-b", "lim-b1", "lim-b2")
	e.rebootProfile("lim-a", nil)
	e.rebootProfile("lim-b", nil)
	for _, p := range []string{"lim-a", "lim-b"} {
		e.rebootsIs(p, "both rebooted", func(st *v1alpha1.RebootRolloutStatus) bool {
			return st.Rebooted == 2 && st.Draining+st.Rebooting+st.Verifying == 0
		})
	}
	e.sim.mu.Lock()
	most := e.sim.maxCordoned
	e.sim.mu.Unlock()
	if most != 1 {
		t.Errorf("at most %d node(s) cordoned at once, want exactly 1 (each in turn)", most)
	}
	e.sim.check(1)
}

// ctrlConfigSkipNameValidation lets a test's manager name its controllers
// as the suite's manager in the same process does.
func ctrlConfigSkipNameValidation() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}
