package fleetsim

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// counters are the API server's own counts of our clients' requests, from
// apiserver_flowcontrol_dispatched_requests_total under the flows.
type counters struct {
	ManagerRequests, AgentRequests float64 // every request
	// ProfileStatusWrites are the manager's patches and updates of
	// latencyprofiles/status; ManagerWrites all its writes, those included.
	ProfileStatusWrites, ManagerWrites float64
	// VerdictWrites are the manager's patches of latencynodes/status (the
	// rollout's status.verdict), counted in ManagerWrites too.
	VerdictWrites float64
	// NodeWrites, LatencyNodeWrites and EventWrites are the manager's
	// writes of Nodes (labels), of LatencyNodes (creates, spec patches,
	// deletes) and of Events, counted in ManagerWrites too.
	NodeWrites, LatencyNodeWrites, EventWrites float64
	// EventSeriesWrites are those of the EventWrites that patch an Event
	// (a series' count), not create one.
	EventSeriesWrites float64
	// AgentStatusWrites are the agents' patches of latencynodes/status.
	AgentStatusWrites float64
	// LatencyNodeWatches is a gauge, not a counter: the open WATCH
	// requests on latencynodes (each agent holds one on its own).
	LatencyNodeWatches float64
}

func (c counters) minus(o counters) counters {
	return counters{ManagerRequests: c.ManagerRequests - o.ManagerRequests, AgentRequests: c.AgentRequests - o.AgentRequests,
		ProfileStatusWrites: c.ProfileStatusWrites - o.ProfileStatusWrites, ManagerWrites: c.ManagerWrites - o.ManagerWrites,
		VerdictWrites: c.VerdictWrites - o.VerdictWrites, AgentStatusWrites: c.AgentStatusWrites - o.AgentStatusWrites,
		NodeWrites: c.NodeWrites - o.NodeWrites, LatencyNodeWrites: c.LatencyNodeWrites - o.LatencyNodeWrites,
		EventWrites: c.EventWrites - o.EventWrites, EventSeriesWrites: c.EventSeriesWrites - o.EventSeriesWrites,
		LatencyNodeWatches: c.LatencyNodeWatches}
}

// add counts v requests dispatched under FlowSchema fs: every schema adds
// to its side's requests, a write schema to its side's writes, and a
// per-resource schema to its own count too.
func (c *counters) add(fs string, v float64) {
	own := map[string]*float64{
		"fleetsim-manager-profile-status": &c.ProfileStatusWrites,
		"fleetsim-manager-node-status":    &c.VerdictWrites,
		"fleetsim-manager-nodes":          &c.NodeWrites,
		"fleetsim-manager-latencynodes":   &c.LatencyNodeWrites,
		"fleetsim-manager-events":         &c.EventWrites,
		"fleetsim-agents-status":          &c.AgentStatusWrites,
	}[fs]
	if own != nil {
		*own += v
	}
	if fs == "fleetsim-manager-event-series" {
		c.EventSeriesWrites += v
		c.EventWrites += v
	}
	switch {
	case strings.HasPrefix(fs, "fleetsim-manager-"):
		c.ManagerRequests += v
		if fs != "fleetsim-manager-other" {
			c.ManagerWrites += v
		}
	case strings.HasPrefix(fs, "fleetsim-agents-"):
		c.AgentRequests += v
	}
}

// scrape reads the API server's /metrics.
func scrape(ctx context.Context, cfg *rest.Config) (counters, error) {
	var c counters
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return c, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return c, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return c, fmt.Errorf("scrape API server metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return c, fmt.Errorf("scrape API server metrics: %s", resp.Status)
	}
	return parseCounters(resp.Body)
}

func parseCounters(r io.Reader) (counters, error) {
	var c counters
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, labels, v, ok := parseSample(sc.Text())
		if !ok {
			continue
		}
		switch {
		case name == "apiserver_flowcontrol_dispatched_requests_total":
			c.add(labels["flow_schema"], v)
		case name == "apiserver_longrunning_requests" && labels["resource"] == "latencynodes" && labels["verb"] == "WATCH":
			c.LatencyNodeWatches += v
		}
	}
	return c, sc.Err()
}

// parseSample parses one Prometheus text-format sample line.
func parseSample(line string) (name string, labels map[string]string, v float64, ok bool) {
	if line == "" || line[0] == '#' {
		return "", nil, 0, false
	}
	labels = map[string]string{}
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", nil, 0, false
		}
		name, rest = line[:i], line[j+1:]
		for _, kv := range splitLabels(line[i+1 : j]) {
			k, val, found := strings.Cut(kv, "=")
			if found {
				labels[k] = strings.Trim(val, `"`)
			}
		}
	} else {
		sp := strings.IndexByte(line, ' ')
		if sp < 0 {
			return "", nil, 0, false
		}
		name, rest = line[:sp], line[sp:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return name, labels, v, err == nil
}

// splitLabels splits `a="x",b="y,z"` at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
