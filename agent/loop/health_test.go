package loop

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	testingclock "k8s.io/utils/clock/testing"

	"latencytier.io/latencytier/agent/measure"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// probe GETs path (with ?verbose, so the body names every check) from the
// health server at addr and returns the status code and body.
func probe(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path + "?verbose")
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// serveHealth serves h on a free loopback port until the test ends.
func serveHealth(t *testing.T, h *Health) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := h.Serve(ctx, "127.0.0.1:0", logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	return addr.String()
}

func wantProbe(t *testing.T, addr, path string, code int, says ...string) {
	t.Helper()
	got, body := probe(t, addr, path)
	if got != code {
		t.Fatalf("%s = %d, want %d:\n%s", path, got, code, body)
	}
	for _, s := range says {
		if !strings.Contains(body, s) {
			t.Fatalf("%s body lacks %q:\n%s", path, s, body)
		}
	}
}

// TestLivenessBound: five resyncs, never under two minutes.
func TestLivenessBound(t *testing.T) {
	for resync, want := range map[time.Duration]time.Duration{
		0:                      150 * time.Second, // the default 30s resync
		300 * time.Millisecond: 2 * time.Minute,
		time.Minute:            5 * time.Minute,
	} {
		if got := LivenessBound(resync); got != want {
			t.Errorf("LivenessBound(%s) = %s, want %s", resync, got, want)
		}
	}
}

// TestLivenessCountsProgressNotOnlyPasses: waiting for the journal is
// live however long it takes; once the journal is owned, no sign of life
// for longer than the bound fails /healthz; progress inside a long pass
// (a step, an engine write) keeps it live, and a finished pass makes it
// live again.
func TestLivenessCountsProgressNotOnlyPasses(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	h := NewHealth(clk, time.Second)
	bound := LivenessBound(time.Second)
	addr := serveHealth(t, h)

	clk.Step(10 * bound)
	wantProbe(t, addr, "/healthz", http.StatusOK)
	wantProbe(t, addr, "/readyz", http.StatusInternalServerError, "[-]journal failed")

	h.JournalOwned()
	clk.Step(bound)
	wantProbe(t, addr, "/healthz", http.StatusOK)
	clk.Step(time.Second)
	wantProbe(t, addr, "/healthz", http.StatusInternalServerError, "[-]loop failed")

	// A pass that started and keeps making progress past the bound.
	h.progress()
	for range 3 {
		clk.Step(bound - time.Second)
		h.progress()
		wantProbe(t, addr, "/healthz", http.StatusOK)
	}
	clk.Step(bound + time.Second)
	wantProbe(t, addr, "/healthz", http.StatusInternalServerError)
	h.passed(false)
	wantProbe(t, addr, "/healthz", http.StatusOK)
	// A pass that stopped on an error is a sign of life, not a full pass.
	wantProbe(t, addr, "/readyz", http.StatusInternalServerError, "[-]pass failed", "[+]journal ok")
}

// gateObserver holds every pass at its Observed call until released, so
// the test sees the loop inside a pass: caches synced, journal owned, no
// pass finished yet.
type gateObserver struct {
	entered chan struct{}
	release chan struct{}
}

func (g *gateObserver) Observed(v1alpha1.LatencyNodeSpec, v1alpha1.LatencyNodeStatus) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
}

func (g *gateObserver) Reasserted([]string)      {}
func (g *gateObserver) Measured(*measure.Result) {}

// TestHealthProbesFollowTheLoop: real HTTP to the probes of a real loop
// against a real API server. Inside the first pass (held by the observer)
// the caches have synced and the journal is owned but /readyz fails on the
// pass alone; a pass held within the bound is live, one held past it (the
// loop wedged) fails /healthz; once the pass finishes both succeed.
func TestHealthProbesFollowTheLoop(t *testing.T) {
	_, env := startAPI(t)
	clk := testingclock.NewFakeClock(time.Now())
	const resync = 300 * time.Millisecond
	bound := LivenessBound(resync)
	h := NewHealth(clk, resync)
	addr := serveHealth(t, h)
	wantProbe(t, addr, "/readyz", http.StatusInternalServerError, "[-]journal failed", "[-]informers failed", "[-]pass failed")
	h.JournalOwned()

	gate := &gateObserver{entered: make(chan struct{}, 1), release: make(chan struct{})}
	runAgent(t, env, Options{NodeName: "node-h", Root: fakeHost(t), Resync: resync, Observer: gate, Health: h})
	t.Cleanup(func() { close(gate.release) }) // runs before the agent is stopped
	select {
	case <-gate.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no pass started")
	}
	wantProbe(t, addr, "/readyz", http.StatusInternalServerError, "[+]journal ok", "[+]informers ok", "[-]pass failed")
	wantProbe(t, addr, "/healthz", http.StatusOK)

	clk.Step(bound)
	wantProbe(t, addr, "/healthz", http.StatusOK)
	clk.Step(time.Second)
	wantProbe(t, addr, "/healthz", http.StatusInternalServerError, "[-]loop failed")

	gate.release <- struct{}{}
	eventually(t, "/readyz succeeds after the first pass", func() bool {
		code, _ := probe(t, addr, "/readyz")
		return code == http.StatusOK
	})
	wantProbe(t, addr, "/healthz", http.StatusOK)
}
