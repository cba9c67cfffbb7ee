package fleetsim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// statusWriteMsg is the agent loop's V(1) log line for each status write,
// with the reason reportDue gave ("why").
const statusWriteMsg = "Patched LatencyNode status"

// whyCounter is the simulated agents' logger: it drops every line but the
// status writes, which it counts by reason, so a phase's progress line
// says why the agents wrote (a first report, settings, current evidence,
// the heartbeat, ...), not only how often.
type whyCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func newWhyCounter() *whyCounter { return &whyCounter{n: map[string]int{}} }

// logger is a logr.Logger into c.
func (c *whyCounter) logger() logr.Logger { return logr.New(whySink{c}) }

// snapshot copies the counts so far.
func (c *whyCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// since formats the counts of now minus before, largest first.
func since(before, now map[string]int) string {
	var parts []string
	keys := slices.Collect(maps.Keys(now))
	slices.SortFunc(keys, func(a, b string) int {
		if d := (now[b] - before[b]) - (now[a] - before[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, k := range keys {
		if d := now[k] - before[k]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, d))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

type whySink struct{ c *whyCounter }

func (whySink) Init(logr.RuntimeInfo)            {}
func (whySink) Enabled(level int) bool           { return level <= 1 }
func (s whySink) WithValues(...any) logr.LogSink { return s }
func (s whySink) WithName(string) logr.LogSink   { return s }
func (whySink) Error(error, string, ...any)      {}

func (s whySink) Info(_ int, msg string, kv ...any) {
	if msg != statusWriteMsg {
		return
	}
	why := "unknown"
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok && k == "why" {
			why = fmt.Sprint(kv[i+1])
		}
	}
	s.c.mu.Lock()
	s.c.n[why]++
	s.c.mu.Unlock()
}
