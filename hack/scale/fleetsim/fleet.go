// Package fleetsim simulates a latency tier at scale against the real
// control plane: it starts etcd and kube-apiserver (the envtest binaries),
// the real manager (`latencytier manager` as a subprocess, or
// controllers.RunManager in process), N Nodes and N agents in this process.
// Each agent is the real agent loop (agent/loop.Run: it watches only its own
// LatencyNode, applies, reports status and measures with the real Measurer)
// against its own temp-dir host root, so nothing touches this machine's
// kernel. What it costs is read from the API server's own metrics and the
// manager process's /proc entry, never counted in our code.
package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"latencytier.io/latencytier/agent/loop"
	"latencytier.io/latencytier/agent/measure"
)

// Options shape one simulated fleet.
type Options struct {
	// Nodes is the fleet size.
	Nodes int
	// Assets holds the envtest etcd and kube-apiserver; CRDDir the CRDs.
	Assets, CRDDir string
	// ManagerBinary runs `<binary> manager` as a subprocess; empty runs the
	// manager in this process (CPU and RSS then go unmeasured).
	ManagerBinary string
	// ManagerArgs are extra manager flags (e.g. --pprof-bind-address).
	ManagerArgs []string
	// Interval is the profile's measurement interval (agents measure
	// every Interval); Resync the agents' drift re-check.
	Interval, Resync time.Duration
	// Heartbeat is the agents' --status-heartbeat: the longest they stay
	// silent when nothing a reader acts on changed. Equal to Interval it
	// is the old reporting (a write per window); 0 is the agent's default.
	Heartbeat time.Duration
	// Settle is waited before each window so the previous phase's tail is
	// not counted; Steady and Quiet are the two windows measured.
	Settle, Steady, Quiet time.Duration
	// Timeout bounds each wait for all nodes to apply.
	Timeout time.Duration
	// Drift, Fail, Regress and Vanish are how many nodes behave so.
	Drift, Fail, Regress, Vanish int
	// Progress receives one line per phase (nil: discarded).
	Progress io.Writer
	// APIServerProfile, when set, is the prefix of the API server's CPU
	// profiles over the first 15 s of the create and of the spec change
	// (<prefix>-N-create.pprof, <prefix>-N-change.pprof).
	APIServerProfile string
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Interval, 30*time.Second)
	def(&o.Resync, 30*time.Second)
	def(&o.Settle, 10*time.Second)
	def(&o.Steady, 2*time.Minute)
	def(&o.Quiet, time.Minute)
	def(&o.Timeout, 5*time.Minute)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// fleet is a running simulation.
type fleet struct {
	o      Options
	api    *apiServer
	mgr    *manager
	hosts  []*fakeHost
	names  []string
	agents map[string]context.CancelFunc
	wg     sync.WaitGroup
	tmp    string
	// hostsDir holds the fake host roots (on tmpfs when there is one).
	hostsDir string
	obs      *observer
	// actx is the agents' context (a silenced agent restarts under it).
	actx context.Context
	// vanished counts the nodes deleted so far.
	vanished int
	// why counts the agents' status writes by reason.
	why *whyCounter
}

// Run simulates one fleet of o.Nodes and returns what it measured.
func Run(ctx context.Context, o Options) (res Result, err error) {
	o.defaults()
	tmp, err := os.MkdirTemp("", "fleetsim-")
	if err != nil {
		return res, err
	}
	defer func() {
		if err != nil || res.Incomplete != "" {
			// Keep what the manager said for whoever reads the failure.
			keep := filepath.Join(os.TempDir(), fmt.Sprintf("fleetsim-manager-%d.log", o.Nodes))
			if os.Rename(filepath.Join(tmp, "manager.log"), keep) == nil {
				_, _ = fmt.Fprintf(o.Progress, "fleetsim N=%d: manager log kept in %s\n", o.Nodes, keep)
			}
		}
		_ = os.RemoveAll(tmp)
	}()
	f := &fleet{o: o, tmp: tmp, agents: map[string]context.CancelFunc{}, why: newWhyCounter()}
	if f.hostsDir, err = hostsDir(tmp); err != nil {
		return res, err
	}
	defer func() { _ = os.RemoveAll(f.hostsDir) }()
	if f.api, err = startAPIServer(ctx, o.Assets, o.CRDDir, tmp); err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, f.api.stop()) }()
	if f.mgr, err = startManager(ctx, o.ManagerBinary, o.ManagerArgs, f.api.mgrKubeconfig, tmp); err != nil {
		return res, err
	}
	defer f.mgr.Stop()
	actx, stopAgents := context.WithCancel(ctx)
	defer func() { stopAgents(); f.wg.Wait() }()
	f.actx = actx
	if f.obs, err = startObserver(actx, f.api.adminCfg, f.logf); err != nil {
		return res, err
	}
	if err := f.createFleet(actx); err != nil {
		return res, err
	}
	if err := f.waitAgentsWatching(actx); err != nil {
		return res, err
	}
	go f.kernel(actx)
	return f.scenario(ctx)
}

func (f *fleet) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(f.o.Progress, "%s fleetsim N=%d: %s\n", time.Now().Format("15:04:05"), f.o.Nodes, fmt.Sprintf(format, args...))
}

// hostsDir makes the directory of the fake host roots: on /dev/shm when
// it is a tmpfs, as /proc and /sys are in-memory on a real node. Under a
// disk-backed temp dir the simulator's own file writes (1000 hosts' ticks
// and the agents' applies) cost it a third of its CPU in syscalls and
// journal work that no real node pays.
func hostsDir(tmp string) (string, error) {
	if isTmpfs("/dev/shm") {
		return os.MkdirTemp("/dev/shm", "fleetsim-hosts-")
	}
	d := filepath.Join(tmp, "hosts")
	return d, os.MkdirAll(d, 0o755)
}

// behaviour assigns the first nodes their behaviours, in the order
// Drift, Fail, Regress, Vanish; the rest are nodeNormal.
func (f *fleet) behaviour(i int) nodeBehaviour {
	for _, b := range []struct {
		n int
		b nodeBehaviour
	}{{f.o.Drift, nodeDrifts}, {f.o.Fail, nodeFails}, {f.o.Regress, nodeRegresses}, {f.o.Vanish, nodeVanishes}} {
		if i < b.n {
			return b.b
		}
		i -= b.n
	}
	return nodeNormal
}

// createFleet creates the Nodes (labelled for the profile) and starts one
// agent per node. Agents start before the profile exists, as DaemonSet
// pods already running would.
func (f *fleet) createFleet(ctx context.Context) error {
	f.logf("creating %d nodes and agents", f.o.Nodes)
	for i := 0; i < f.o.Nodes; i++ {
		name := fmt.Sprintf("sim-%05d", i)
		h, err := newFakeHost(filepath.Join(f.hostsDir, name), f.behaviour(i),
			time.Duration(40+rand.IntN(40))*time.Microsecond, f.o.Interval, rand.IntN(len(wander)))
		if err != nil {
			return err
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{tierLabel: ""}}}
		if err := f.api.admin.Create(ctx, n); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if err := f.api.admin.Status().Update(ctx, n); err != nil {
			return fmt.Errorf("mark node %s ready: %w", name, err)
		}
		f.hosts, f.names = append(f.hosts, h), append(f.names, name)
		f.startAgent(ctx, name, h)
	}
	return nil
}

// waitAgentsWatching waits until every agent has its watch open (the API
// server's own gauge, apiserver_longrunning_requests), so the profile is
// created on a running fleet as on a cluster whose DaemonSet pods already
// run: 1000 agents starting together (discovery, informers) are a cost of
// the simulator's one process, not of applying a profile.
func (f *fleet) waitAgentsWatching(ctx context.Context) error {
	start := time.Now()
	for {
		c, err := scrape(ctx, f.api.adminCfg)
		if err != nil {
			return err
		}
		if int(c.LatencyNodeWatches) >= f.o.Nodes {
			f.logf("%d agents watching after %s", f.o.Nodes, time.Since(start).Round(time.Millisecond))
			return nil
		}
		if time.Since(start) > f.o.Timeout {
			return fmt.Errorf("after %s only %.0f of %d agents watch their LatencyNode", f.o.Timeout, c.LatencyNodeWatches, f.o.Nodes)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (f *fleet) startAgent(ctx context.Context, name string, h *fakeHost) {
	actx, cancel := context.WithCancel(ctx)
	f.agents[name] = cancel
	log := logr.Discard()
	meter := loop.NewMeter(measure.New(h.root, log, measure.WithAttach(measure.AttachNone)), clock.RealClock{}, log)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		_ = loop.Run(actx, loop.Options{NodeName: name, Root: h.root, Resync: f.o.Resync, Log: f.why.logger(),
			Config: f.api.agentCfg, Meter: meter, Heartbeat: f.o.Heartbeat})
	}()
}

// kernel advances every simulated node's counters every 5 s (the shortest measurement interval).
func (f *fleet) kernel(ctx context.Context) {
	const step = 5 * time.Second
	t := time.NewTicker(step)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, h := range f.hosts {
			_ = h.tick(step)
		}
	}
}
