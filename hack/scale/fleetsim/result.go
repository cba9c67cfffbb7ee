package fleetsim

import "time"

// Result is what one fleet measured.
type Result struct {
	Nodes int
	// Apply is profile create → every node reported on generation 1;
	// SpecChange is a spec patch → every node reported on generation 2.
	Apply, SpecChange time.Duration
	// Applied and Reported count the nodes at the end of Apply (Fail
	// nodes report Applied False).
	Applied, Reported int
	// CreateCost and ChangeCost are what the create and the spec change
	// cost per node: CPU and writes.
	CreateCost, ChangeCost PhaseCost
	// FirstWindowWrites are the agents' status writes per node from the
	// create until every node's first window under the tuning was judged
	// (the manager then wrote nothing for 10 s): the create's report and
	// its first verdicts, which a node writes at any fleet size; the
	// create phase counts the verdicts only of the nodes whose first
	// window ends before the last node reported, so more of them the
	// longer the phase lasts.
	FirstWindowWrites float64
	// Steady is the steady-state window: agents measuring every Interval.
	Steady Window
	// Quiet is the window with measurement Disabled and nothing changing.
	Quiet Window
	// QuietSettle is how long after the measurement-disabled change the
	// manager's last write of it came (the quiet window starts after).
	QuietSettle time.Duration
	// VanishCleanup is how long the manager took to remove the vanished
	// nodes' LatencyNodes (0 when none vanished).
	VanishCleanup time.Duration
	// ManagerMeasured says CPU and RSS are the manager's own (subprocess).
	ManagerMeasured bool
	Interval        time.Duration
	// Heartbeat is the agents' heartbeat as they report it
	// (status.heartbeatInterval); Old says it equals Interval (the old
	// reporting: a status write per window).
	Heartbeat time.Duration
	Old       bool
	// StaleAfter is how long after one node's agent fell silent (at the
	// start of the steady window, its Node still Ready) the profile showed
	// the node Stale; 0 when it never did within StaleLimit.
	StaleAfter, StaleLimit time.Duration
	// Incomplete says which wait timed out (the figures after it are
	// missing); empty when the run completed.
	Incomplete string
}

// Window is one measured window, per minute.
type Window struct {
	Length time.Duration
	// ManagerCPU is core-seconds per minute; ManagerRSS the highest VmRSS
	// sampled in the window (bytes).
	ManagerCPU float64
	ManagerRSS uint64
	// Requests per minute from the API server's counters.
	ManagerRequests, AgentRequests         float64
	ProfileStatusWrites, AgentStatusWrites float64
	// ManagerWrites is the total (not per minute) in the window, and
	// VerdictWrites those of them to LatencyNode status.
	ManagerWrites, VerdictWrites float64
	// EventSeriesWrites are those of ManagerWrites that patch an Event's
	// series (client-go closing a series of earlier events), in total.
	EventSeriesWrites float64
	// APIServerCPU is the API server's CPU over the window, in cores.
	APIServerCPU float64
	// Nodes is how many agents were reporting in the window.
	Nodes int
}

// PhaseCost is one phase's cost per node: CPU time (ms) of the API
// server, etcd, the simulator (the agents) and the manager, and the
// writes of the manager and of the agents.
type PhaseCost struct {
	APIServer, Etcd, Simulator, Manager float64
	ManagerWrites, AgentWrites          float64
}

// APIServerPerWrite is the API server's CPU per write in the phase, the
// manager's and the agents' together (ms; 0 with no writes).
func (c PhaseCost) APIServerPerWrite() float64 {
	if w := c.ManagerWrites + c.AgentWrites; w > 0 {
		return c.APIServer / w
	}
	return 0
}

// CPU is the phase's CPU per node, every process together (ms).
func (c PhaseCost) CPU() float64 { return c.APIServer + c.Etcd + c.Simulator + c.Manager }

// StatusWritesPerNodeHour is the agents' status writes per node per hour.
func (w Window) StatusWritesPerNodeHour() float64 {
	if w.Nodes == 0 {
		return 0
	}
	return w.AgentStatusWrites * 60 / float64(w.Nodes)
}
