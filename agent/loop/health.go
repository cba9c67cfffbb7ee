package loop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// DefaultResync is the drift re-check interval when none is set.
const DefaultResync = 30 * time.Second

// minLivenessBound is the shortest time the loop may go without a sign of
// life before /healthz fails, whatever the resync: a restart costs a cache
// sync and a full pass, and a slow API server or a busy node must not
// cause restarts.
const minLivenessBound = 2 * time.Minute

// syncCheckTimeout bounds how long /readyz waits for the informer caches,
// well under the kubelet's default probe timeout (1 s is its minimum).
const syncCheckTimeout = 500 * time.Millisecond

// LivenessBound is how long the loop may go without a sign of life before
// it counts as wedged: five resync intervals (a pass is due every resync),
// and never less than two minutes.
func LivenessBound(resync time.Duration) time.Duration {
	if resync <= 0 {
		resync = DefaultResync
	}
	return max(5*resync, minLivenessBound)
}

// Health is what the agent's probes report.
//
// Ready: the journal is the agent's (journal.OwnWait returned), the
// informer caches have synced, and at least one full pass has finished
// since start, whatever the outcome of its settings.
//
// Live: the loop is not wedged. A sign of life is a pass that finished
// (full or not), the journal becoming the agent's, or progress inside a
// pass: each step of it and every kernel write the apply engine makes. Live
// fails when the newest sign of life is older than LivenessBound. So a long
// pass that keeps writing or moving between steps is never killed, only
// one stuck in a single step (a hung write, an API call that never
// returns) for the whole bound. While the agent waits for the journal it
// is live: it polls the lock every second, and a restart would only wait
// again behind the same owner (a one-shot `agent apply`).
type Health struct {
	clock clock.PassiveClock
	bound time.Duration

	mu      sync.Mutex
	journal bool
	// alive is the newest sign of life (the start until there is one).
	alive  time.Time
	passes int
	synced func(context.Context) bool
}

// NewHealth starts the probes' state at the clock's now, with the liveness
// bound derived from resync.
func NewHealth(c clock.PassiveClock, resync time.Duration) *Health {
	return &Health{clock: c, bound: LivenessBound(resync), alive: c.Now()}
}

// JournalOwned records that the agent owns the journal.
func (h *Health) JournalOwned() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.journal = true
	h.alive = h.clock.Now()
}

// watchCaches gives readiness the manager's informer caches.
func (h *Health) watchCaches(synced func(context.Context) bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.synced = synced
}

// progress records a step inside a pass.
func (h *Health) progress() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.alive = h.clock.Now()
}

// passed records a finished pass; full is false when it stopped early on
// an error.
func (h *Health) passed(full bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.alive = h.clock.Now()
	if full {
		h.passes++
	}
}

// live is the /healthz check.
func (h *Health) live(*http.Request) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.journal {
		return nil
	}
	if age := h.clock.Since(h.alive); age > h.bound {
		return fmt.Errorf("the loop showed no progress for %s (bound %s)", age.Round(time.Second), h.bound)
	}
	return nil
}

func (h *Health) journalOwned(*http.Request) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.journal {
		return errors.New("waiting for the journal: another process owns it")
	}
	return nil
}

func (h *Health) cachesSynced(req *http.Request) error {
	h.mu.Lock()
	synced := h.synced
	h.mu.Unlock()
	if synced == nil {
		return errors.New("the informer caches have not started")
	}
	ctx, cancel := context.WithTimeout(req.Context(), syncCheckTimeout)
	defer cancel()
	if !synced(ctx) {
		return errors.New("the informer caches have not synced")
	}
	return nil
}

func (h *Health) passFinished(*http.Request) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.passes == 0 {
		return errors.New("no full pass has finished yet")
	}
	return nil
}

// Handler serves /healthz and /readyz (and /healthz/<check>,
// /readyz/<check>; ?verbose lists every check).
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	for path, checks := range map[string]map[string]healthz.Checker{
		"/healthz": {"loop": h.live},
		"/readyz":  {"journal": h.journalOwned, "informers": h.cachesSynced, "pass": h.passFinished},
	} {
		hh := http.StripPrefix(path, &healthz.Handler{Checks: checks})
		mux.Handle(path, hh)
		mux.Handle(path+"/", hh)
	}
	return mux
}

// Serve listens on addr now (so a taken port fails the start) and serves
// the probes over plain HTTP until ctx ends. It returns the address bound.
func (h *Health) Serve(ctx context.Context, addr string, log logr.Logger) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("health probes: %w", err)
	}
	srv := &http.Server{Handler: h.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "Health probe server stopped")
		}
	}()
	log.Info("Serving health probes", "address", ln.Addr().String())
	return ln.Addr(), nil
}
