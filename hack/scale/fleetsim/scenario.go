package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

const (
	profileName = "fleet"
	tierLabel   = "tier.latencytier.io/fleet"
)

func (f *fleet) profile() *v1alpha1.LatencyProfile {
	dis := v1alpha1.Disabled
	return &v1alpha1.LatencyProfile{
		ObjectMeta: metav1.ObjectMeta{Name: profileName},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{tierLabel: ""}},
			TuningSpec: v1alpha1.TuningSpec{
				Scheduler: &v1alpha1.SchedulerSpec{Autogroup: &dis, NumaBalancing: &dis,
					MigrationCost: &metav1.Duration{Duration: 5 * time.Millisecond}},
				CPUs:          &v1alpha1.CPUSpec{Reserved: ptr.To("0")},
				IRQ:           &v1alpha1.IRQSpec{Affinity: v1alpha1.IRQAffinity("Reserved")},
				Measurement:   &v1alpha1.MeasurementSpec{Source: v1alpha1.MeasurementAuto, Interval: &metav1.Duration{Duration: f.o.Interval}},
				LatencyBudget: &v1alpha1.LatencyBudget{RunQueueP99: &metav1.Duration{Duration: 2 * time.Millisecond}},
			},
		},
	}
}

// scenario: create the profile, wait for every node; measure the steady
// state; let the vanishing nodes go; change the spec and wait; disable
// measurement, wait, and measure the quiet state.
func (f *fleet) scenario(ctx context.Context) (Result, error) {
	// Heartbeat is the configured one until the profile shows its own
	// (an incomplete run is labelled by it).
	res := Result{Nodes: f.o.Nodes, Interval: f.o.Interval, Heartbeat: f.o.Heartbeat, Old: f.o.Heartbeat == f.o.Interval}
	p := f.profile()
	c0, _ := scrape(ctx, f.api.adminCfg)
	cpu0 := f.mgr.shares()
	why0 := f.why.snapshot()
	prof := f.profileAPIServer(ctx, f.profilePath("create"), apiProfileFor)
	start := time.Now()
	if err := f.api.admin.Create(ctx, p); err != nil {
		return res, fmt.Errorf("create profile: %w", err)
	}
	var err error
	res.Apply, res.Applied, err = f.obs.waitReported(ctx, profileName, 1, f.o.Nodes, start, f.o.Timeout)
	res.CreateCost = f.logWrites("create", c0, cpu0, why0, start)
	prof()
	if err != nil {
		return f.incomplete(res, "profile created", err)
	}
	res.Reported = f.o.Nodes
	f.logf("all %d nodes reported in %s (%d Applied)", f.o.Nodes, res.Apply.Round(time.Millisecond), res.Applied)

	// Steady state starts once every node's first window under the tuning
	// has ended and been judged (a profile status write with the verdicts, the
	// evidence of the create): one interval, then the manager's writes end.
	time.Sleep(f.o.Interval)
	if _, settled, err := f.managerSettled(ctx, start); err != nil || !settled {
		res.Incomplete = fmt.Sprintf("after create: the manager still wrote %s after all nodes reported", f.o.Timeout)
		_, res.ManagerMeasured = f.mgr.sample()
		return res, err
	}
	if c1, err := scrape(ctx, f.api.adminCfg); err == nil {
		res.FirstWindowWrites = c1.minus(c0).AgentStatusWrites / float64(f.o.Nodes)
		f.logf("create through every node's first window, %s: agents' status writes %.2f per node, by reason: %s",
			time.Since(start).Round(time.Second), res.FirstWindowWrites, since(why0, f.why.snapshot()))
	}
	res.Heartbeat = f.obs.heartbeat(ctx, profileName)
	silent, silentAt := f.silence()
	res.StaleLimit = 3 * res.Heartbeat
	// Watched from the moment of silence, through the steady window: a
	// first look after it would only bound the time from above.
	stale := make(chan staleSeen, 1)
	go func() {
		d, err := f.waitStale(ctx, silent, silentAt, res.StaleLimit)
		stale <- staleSeen{d, err}
	}()
	if res.Steady, err = f.window(ctx, "steady", f.o.Steady); err != nil {
		return res, err
	}
	res.Steady.Nodes--
	seen := <-stale
	if res.StaleAfter, err = seen.after, seen.err; err != nil {
		return res, err
	}
	f.resume(silent)
	if res.VanishCleanup, err = f.vanish(ctx); err != nil {
		return res, err
	}
	remaining := f.o.Nodes - f.o.Vanish
	for _, h := range f.hosts {
		h.startRegression()
	}
	c0, _ = scrape(ctx, f.api.adminCfg)
	cpu0 = f.mgr.shares()
	why0 = f.why.snapshot()
	prof = f.profileAPIServer(ctx, f.profilePath("change"), apiProfileFor)
	start = time.Now()
	if err := f.patchProfile(ctx, func(s *v1alpha1.LatencyProfileSpec) {
		s.Scheduler.MigrationCost = &metav1.Duration{Duration: 4 * time.Millisecond}
	}); err != nil {
		return res, err
	}
	res.SpecChange, _, err = f.obs.waitReported(ctx, profileName, 2, remaining, start, f.o.Timeout)
	res.ChangeCost = f.logWrites("spec change", c0, cpu0, why0, start)
	prof()
	if err != nil {
		return f.incomplete(res, "spec changed", err)
	}
	f.logf("spec change reached all %d nodes in %s", remaining, res.SpecChange.Round(time.Millisecond))

	start = time.Now()
	if err := f.patchProfile(ctx, func(s *v1alpha1.LatencyProfileSpec) {
		s.Measurement.Source = v1alpha1.MeasurementDisabled
	}); err != nil {
		return res, err
	}
	if _, _, err = f.obs.waitReported(ctx, profileName, 3, remaining, start, f.o.Timeout); err != nil {
		return f.incomplete(res, "measurement disabled", err)
	}
	// The change itself is written (the profile status); the
	// quiet window measures what follows, once the manager has stopped.
	var settled bool
	if res.QuietSettle, settled, err = f.managerSettled(ctx, start); err != nil || !settled {
		res.Incomplete = fmt.Sprintf("measurement disabled: the manager still wrote %s after the change", f.o.Timeout)
		_, res.ManagerMeasured = f.mgr.sample()
		return res, err
	}
	res.Quiet, err = f.window(ctx, "quiet (measurement Disabled)", f.o.Quiet)
	_, res.ManagerMeasured = f.mgr.sample()
	return res, err
}

// apiProfileFor is how long each API server CPU profile runs.
const apiProfileFor = 15 * time.Second

func (f *fleet) profilePath(phase string) string {
	if f.o.APIServerProfile == "" {
		return ""
	}
	return fmt.Sprintf("%s-%d-%s.pprof", f.o.APIServerProfile, f.o.Nodes, phase)
}

// incomplete ends a run whose nodes did not all report in time: with the
// manager still up, that is a finding (res.Incomplete, nil error);
// otherwise the simulator broke.
func (f *fleet) incomplete(res Result, phase string, err error) (Result, error) {
	var ie *incompleteError
	if merr := f.mgr.exited(); merr != nil || !errors.As(err, &ie) {
		return res, f.withManager(err)
	}
	res.Incomplete = fmt.Sprintf("%s: only %d of %d nodes reported within %s", phase, ie.Reported, ie.Want, ie.After)
	if res.Reported == 0 {
		res.Reported = ie.Reported
	}
	f.logf("%s", res.Incomplete)
	_, res.ManagerMeasured = f.mgr.sample()
	return res, nil
}

func (f *fleet) withManager(err error) error {
	if merr := f.mgr.exited(); merr != nil {
		return fmt.Errorf("%w (%v)", err, merr)
	}
	return err
}

func (f *fleet) patchProfile(ctx context.Context, change func(*v1alpha1.LatencyProfileSpec)) error {
	var p v1alpha1.LatencyProfile
	if err := f.api.admin.Get(ctx, client.ObjectKey{Name: profileName}, &p); err != nil {
		return err
	}
	orig := p.DeepCopy()
	change(&p.Spec)
	if err := f.api.admin.Patch(ctx, &p, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("patch profile: %w", err)
	}
	return nil
}

// vanish deletes the nodeVanishes nodes, stops their agents and returns how
// long the manager took to remove their LatencyNodes.
func (f *fleet) vanish(ctx context.Context) (time.Duration, error) {
	if f.o.Vanish == 0 {
		return 0, nil
	}
	start := time.Now()
	for i, h := range f.hosts {
		if h.b != nodeVanishes {
			continue
		}
		f.agents[f.names[i]]()
		f.vanished++
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.names[i]}}
		if err := f.api.admin.Delete(ctx, n); err != nil {
			return 0, fmt.Errorf("delete node %s: %w", n.Name, err)
		}
	}
	want := f.o.Nodes - f.o.Vanish
	for {
		n, err := f.obs.countNodes(ctx, profileName)
		if err != nil {
			return 0, err
		}
		if n <= want {
			d := time.Since(start)
			f.logf("%d vanished nodes cleaned up in %s", f.o.Vanish, d.Round(time.Millisecond))
			return d, nil
		}
		if time.Since(start) > f.o.Timeout {
			return 0, fmt.Errorf("%d LatencyNodes left %s after %d nodes vanished", n, f.o.Timeout, f.o.Vanish)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settledFor is how long the manager's writes must stay unchanged for the
// change before to count as written.
const settledFor = 10 * time.Second

// managerSettled waits until the manager has made no write for settledFor
// and returns when its last write came, counted from start; settled is
// false when it still wrote at the run's timeout.
func (f *fleet) managerSettled(ctx context.Context, start time.Time) (last time.Duration, settled bool, err error) {
	// The timeout runs from now, not from start: a 5000-node create that
	// took 4m48s left the manager 12 s to settle in a 5m timeout.
	writes, lastAt, begin := -1.0, time.Now(), time.Now()
	for {
		c, err := scrape(ctx, f.api.adminCfg)
		if err != nil {
			return 0, false, err
		}
		if c.ManagerWrites != writes {
			writes, lastAt = c.ManagerWrites, time.Now()
		}
		if time.Since(lastAt) >= settledFor {
			d := lastAt.Sub(start)
			f.logf("the manager's writes for the change ended %s after it", d.Round(time.Second))
			return d, true, nil
		}
		if time.Since(begin) > f.o.Timeout {
			return 0, false, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// window settles, then measures for length: the API server's counters and
// the manager's CPU at both ends, its RSS every second.
func (f *fleet) window(ctx context.Context, name string, length time.Duration) (Window, error) {
	w := Window{Length: length}
	time.Sleep(f.o.Settle)
	c0, err := scrape(ctx, f.api.adminCfg)
	if err != nil {
		return w, err
	}
	u0, _ := f.mgr.sample()
	cpu0 := f.mgr.shares()
	why0 := f.why.snapshot()
	start := time.Now()
	for time.Since(start) < length {
		select {
		case <-ctx.Done():
			return w, ctx.Err()
		case <-time.After(time.Second):
		}
		if u, ok := f.mgr.sample(); ok && u.rss > w.ManagerRSS {
			w.ManagerRSS = u.rss
		}
	}
	u1, _ := f.mgr.sample()
	cpu1 := f.mgr.shares()
	c1, err := scrape(ctx, f.api.adminCfg)
	if err != nil {
		return w, err
	}
	mins := time.Since(start).Minutes()
	d := c1.minus(c0)
	w.APIServerCPU = (cpu1.apiserver - cpu0.apiserver).Seconds() / time.Since(start).Seconds()
	w.Nodes = f.o.Nodes - f.vanished
	w.ManagerCPU = (u1.cpu - u0.cpu).Seconds() / mins
	w.ManagerRequests, w.AgentRequests = d.ManagerRequests/mins, d.AgentRequests/mins
	w.ProfileStatusWrites, w.AgentStatusWrites = d.ProfileStatusWrites/mins, d.AgentStatusWrites/mins
	w.ManagerWrites, w.VerdictWrites, w.EventSeriesWrites = d.ManagerWrites, d.VerdictWrites, d.EventSeriesWrites
	f.logf("%s window %s: manager %.1f req/min, %.0f writes (%.0f verdicts, %.0f Node, %.0f LatencyNode, %.0f Event of which %.0f series updates), %.3f core, %.0f MiB; agents %.1f req/min, %.1f status writes/min; profile status writes %.1f/min; API server %.2f core",
		name, length, w.ManagerRequests, w.ManagerWrites, w.VerdictWrites, d.NodeWrites, d.LatencyNodeWrites, d.EventWrites, d.EventSeriesWrites, w.ManagerCPU/60, float64(w.ManagerRSS)/(1<<20), w.AgentRequests, w.AgentStatusWrites, w.ProfileStatusWrites, w.APIServerCPU)
	f.logf("%s window: agents' status writes by reason: %s", name, since(why0, f.why.snapshot()))
	return w, f.withManager(nil)
}

// logWrites logs what the manager and the agents wrote since c0 (start),
// and how the machine's CPU went since cpu0: API server, etcd, the
// simulator (the agents) and the manager, in cores.
func (f *fleet) logWrites(phase string, c0 counters, cpu0 cpuShares, why0 map[string]int, start time.Time) PhaseCost {
	c1, err := scrape(context.Background(), f.api.adminCfg)
	if err != nil {
		return PhaseCost{}
	}
	cpu1 := f.mgr.shares()
	el := time.Since(start)
	core := func(a, b time.Duration) float64 { return (b - a).Seconds() / el.Seconds() }
	d := c1.minus(c0)
	f.logf("%s, %s: manager %.0f requests, %.0f writes (%.0f verdicts, %.0f profile status, %.0f Node, %.0f LatencyNode, %.0f Event); agents %.0f requests, %.0f status writes; cores: API server %.2f, etcd %.2f, simulator %.2f, manager %.2f",
		phase, el.Round(time.Second), d.ManagerRequests, d.ManagerWrites, d.VerdictWrites,
		d.ProfileStatusWrites, d.NodeWrites, d.LatencyNodeWrites, d.EventWrites, d.AgentRequests, d.AgentStatusWrites,
		core(cpu0.apiserver, cpu1.apiserver), core(cpu0.etcd, cpu1.etcd), core(cpu0.sim, cpu1.sim), core(cpu0.manager, cpu1.manager))
	// CPU per node is what a larger fleet needs of the machine: on a
	// shared or loaded machine the phase's time is not, its CPU roughly is.
	n := float64(f.o.Nodes - f.vanished)
	perNode := func(a, b time.Duration) float64 { return float64((b - a).Microseconds()) / 1000 / n }
	pc := PhaseCost{APIServer: perNode(cpu0.apiserver, cpu1.apiserver), Etcd: perNode(cpu0.etcd, cpu1.etcd),
		Simulator: perNode(cpu0.sim, cpu1.sim), Manager: perNode(cpu0.manager, cpu1.manager),
		ManagerWrites: d.ManagerWrites / n, AgentWrites: d.AgentStatusWrites / n}
	f.logf("%s: agents' status writes by reason: %s", phase, since(why0, f.why.snapshot()))
	f.logf("%s: CPU per node %.1f ms (API server %.1f, etcd %.1f, simulator %.1f, manager %.1f); writes per node: manager %.2f, agents %.2f",
		phase, pc.CPU(), pc.APIServer, pc.Etcd, pc.Simulator, pc.Manager, pc.ManagerWrites, pc.AgentWrites)
	return pc
}

// silence stops the agent of the fleet's last normal node, as a node whose
// agent hung would be: its Node stays Ready and its LatencyNode keeps the
// last status it wrote.
func (f *fleet) silence() (name string, at time.Time) {
	for i := len(f.hosts) - 1; i >= 0; i-- {
		if f.hosts[i].b == nodeNormal {
			name = f.names[i]
			break
		}
	}
	if name == "" {
		return "", time.Time{}
	}
	f.agents[name]()
	f.logf("agent of %s silenced", name)
	return name, time.Now()
}

// resume starts the silenced node's agent again.
func (f *fleet) resume(name string) {
	for i, n := range f.names {
		if n == name {
			f.startAgent(f.actx, name, f.hosts[i])
			return
		}
	}
}

type staleSeen struct {
	after time.Duration
	err   error
}

// waitStale waits until the profile's status shows the silenced node
// Stale, at most limit after it fell silent, and returns how long that
// took (0 when it did not within limit, a result rather than an error).
func (f *fleet) waitStale(ctx context.Context, name string, since time.Time, limit time.Duration) (time.Duration, error) {
	if name == "" || limit <= 0 {
		return 0, nil
	}
	for {
		var p v1alpha1.LatencyProfile
		if err := f.api.admin.Get(ctx, client.ObjectKey{Name: profileName}, &p); err != nil {
			return 0, err
		}
		for _, n := range p.Status.Nodes {
			if n.Name == name && n.State == v1alpha1.NodeStateStale {
				d := time.Since(since)
				f.logf("%s shown Stale %s after its agent fell silent (stale count %d)", name, d.Round(time.Second), p.Status.Stale)
				return d, nil
			}
		}
		if time.Since(since) > limit {
			f.logf("%s not shown Stale within %s of its agent falling silent", name, limit)
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
