package tiersched

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/schedext"
	tbpf "latencytier.io/latencytier/agent/tiersched/bpf"
)

// ExitFile is the marker the agent writes in its state directory when the
// kernel ejected the scheduler. While it exists the scheduler is not
// loaded again (Write refuses); the agent removes it (ClearExit) when the
// node is given a new revision or reverted, never by itself: a scheduler
// the kernel threw out is not reloaded in a loop, across agent restarts
// included.
const ExitFile = "schedext-exit.json"

// Exit is the marker's content.
type Exit struct {
	// Revision is the node spec revision the scheduler was loaded for.
	Revision string `json:"revision"`
	// EnableSeq is /sys/kernel/sched_ext/enable_seq when it was seen gone.
	EnableSeq int64 `json:"enableSeq"`
	// Kind, Reason and Msg are the kernel's exit info (scx_exit_info):
	// SCX_EXIT_* kind, its text ("runnable task stall") and the message
	// ("kworker/1:2[812] failed to run for 5.004s").
	Kind   int32     `json:"kind"`
	Reason string    `json:"reason"`
	Msg    string    `json:"msg,omitempty"`
	At     time.Time `json:"at"`
}

// Message is the setting's Fallback message.
func (e Exit) Message() string {
	return fmt.Sprintf("kernel ejected %s: %s", tbpf.OpsName, exitMessage(tbpf.Exit{Kind: e.Kind, Reason: e.Reason, Msg: e.Msg}))
}

func exitMessage(ex tbpf.Exit) string {
	reason := ex.Reason
	if reason == "" {
		reason = fmt.Sprintf("exit kind %d", ex.Kind)
	}
	if ex.Msg != "" && ex.Msg != reason {
		reason += " (" + ex.Msg + ")"
	}
	return bound.String(reason, 400)
}

// ReadExit is the marker, nil when there is none.
func ReadExit(root *host.Root) (*Exit, error) {
	dir, exists, err := root.CheckStateDir()
	if err != nil || !exists {
		return nil, err
	}
	b, err := root.ReadOwn(filepath.Join(dir, ExitFile))
	if notExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var e Exit
	if err := json.Unmarshal(b, &e); err != nil {
		// A marker is a refusal to reload; an unreadable one still is.
		return &Exit{Reason: "unreadable exit marker " + ExitFile + ": " + err.Error()}, nil
	}
	e.Reason, e.Msg, e.Revision = bound.String(e.Reason, 128), bound.String(e.Msg, 256), bound.String(e.Revision, 128)
	return &e, nil
}

// ClearExit removes the marker: the node was given another revision or
// reverted, so loading again is a decision, not a loop.
func ClearExit(root *host.Root) error {
	dir, exists, err := root.CheckStateDir()
	if err != nil || !exists {
		return err
	}
	if err := removeFile(filepath.Join(dir, ExitFile)); err != nil && !notExist(err) {
		return err
	}
	return nil
}

// Ejected says the pinned scheduler is no longer the one running: the
// kernel disabled it (a stall, an error, SysRq-S) while the agent's pins
// still hold it.
func Ejected(pinned bool, st schedext.State) bool {
	if !pinned {
		return false
	}
	running := st.Ops == tbpf.OpsName && (st.State == schedext.StateEnabled || st.State == schedext.StateEnabling)
	return !running
}

// Check looks once: when the kernel ejected the pinned scheduler it
// records the exit marker for revision, then detaches and unpins what is
// left. It returns the marker it wrote, nil when nothing happened.
func Check(root *host.Root, revision string, now time.Time) (*Exit, error) {
	dir := PinDir(root)
	if !tbpf.Pinned(dir) {
		return nil, nil // the common case, one stat a second
	}
	st := schedext.Read(root)
	if !Ejected(true, st) {
		return nil, nil
	}
	ex := &Exit{Revision: revision, EnableSeq: st.EnableSeq, At: now.UTC()}
	if m, err := tbpf.OpenMaps(dir); err == nil {
		if info, err := m.Exit(); err == nil {
			ex.Kind, ex.Reason, ex.Msg = info.Kind, info.Reason, info.Msg
		}
		m.Close()
	}
	if ex.Reason == "" && ex.Kind == 0 {
		ex.Reason = fmt.Sprintf("gone without exit info (kernel shows %s)", st)
	}
	b, err := json.Marshal(ex)
	if err != nil {
		return nil, err
	}
	if err := root.WriteOwn(ExitFile, b); err != nil {
		return nil, fmt.Errorf("record the tier scheduler's exit: %w", err)
	}
	return ex, tbpf.Unpin(dir)
}

// Watcher checks every Interval (a manager Runnable beside the loop) and
// calls Ejected after recording an ejection, so a pass reports Fallback
// within a second or so of the kernel's decision.
//
// With Wake set it checks only while the tier scheduler is wanted or
// pinned: a node that never runs it is not woken every second for a stat
// (issue 43: on a latency-tier node a daemon's needless wakeups are
// jitter, and in bench-scale's simulator they were 8 % of its CPU). Idle,
// it holds no timer and waits for Wake, which a pass that wants the
// scheduler sends on before loading it.
type Watcher struct {
	Root *host.Root
	// Revision is the revision the node holds (the marker records it).
	Revision func() string
	// OnEject is called after an ejection was recorded (enqueue a pass).
	OnEject  func(*Exit)
	Interval time.Duration
	Log      logr.Logger
	// Wanted says a pass wants the tier scheduler here; Wake receives
	// when that becomes so. Both nil: check every Interval throughout.
	Wanted func() bool
	Wake   <-chan struct{}
}

// idle says the watcher has nothing to watch: it waits on Wake, nothing
// is wanted and nothing is pinned.
func (w *Watcher) idle() bool {
	return w.Wake != nil && w.Wanted != nil && !w.Wanted() && !tbpf.Pinned(PinDir(w.Root))
}

// Start watches until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	iv := w.Interval
	if iv <= 0 {
		iv = time.Second
	}
	for {
		if w.idle() {
			select {
			case <-ctx.Done():
				return nil
			case <-w.Wake:
			}
		}
		if !w.poll(ctx, iv) {
			return nil
		}
	}
}

// poll checks every iv until ctx ends (false) or the watcher is idle
// (true).
func (w *Watcher) poll(ctx context.Context, iv time.Duration) bool {
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case now := <-t.C:
			ex, err := Check(w.Root, w.Revision(), now)
			if err != nil {
				w.Log.Error(err, "Failed to record the tier scheduler's exit")
			}
			if ex != nil {
				w.Log.Info("Kernel ejected the tier scheduler; not reloading it", "reason", ex.Reason, "msg", ex.Msg, "revision", ex.Revision)
				if w.OnEject != nil {
					w.OnEject(ex)
				}
			}
			if w.idle() {
				return true
			}
		}
	}
}
