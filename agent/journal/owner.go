package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"latencytier.io/latencytier/agent/host"
)

// ownerFileName is the journal's one lock, a file in the state directory.
// The process that holds an exclusive flock on it owns the journal; the file
// says who that is. The kernel drops the lock when the owner dies, so a
// killed agent never blocks the next one. The DaemonSet agent holds it for
// its lifetime (OwnWait), a one-shot command for its run (Own); every Apply
// and Revert runs under it (Lock).
const ownerFileName = "owner.lock"

// legacyLockName is the second lock agents before the single lock took
// around each Apply and Revert, always while holding the owner lock. An
// owner removes the file that is left: no process of that version can hold
// it while the owner lock is ours.
const legacyLockName = "journal.lock"

// owned maps the state directories this process owns (Own) to the mutex
// that serialises this process's engine operations on their journal: a
// second flock from the owning process would wait for itself.
var owned = struct {
	sync.Mutex
	dirs map[string]*sync.Mutex
}{dirs: map[string]*sync.Mutex{}}

// Mode names the kind of process that owns the journal.
const (
	// ModeAgent is the long-running DaemonSet agent: it owns the journal
	// for as long as it runs.
	ModeAgent = "agent"
	// ModeCLI is a one-shot `latencytier agent apply|revert` on the node.
	ModeCLI = "cli"
)

// Owner is what the owner file says about its holder.
type Owner struct {
	Mode string
	// PID is the owner's pid as the host root's /proc sees it (the host's
	// pid for an agent in a pod), or its own pid when that is unknown.
	PID int
	// Name is the owner's host name (the pod name in the DaemonSet).
	Name  string
	Since time.Time
}

func (o Owner) String() string {
	what := "the DaemonSet agent"
	if o.Mode == ModeCLI {
		what = "a `latencytier agent` command"
	}
	return fmt.Sprintf("%s (pid %d on %s, since %s)", what, o.PID, o.Name, o.Since.Format(time.RFC3339))
}

// HeldError says another process owns the journal.
type HeldError struct {
	Dir   string
	Owner Owner
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("the journal in %s is owned by %s", e.Dir, e.Owner)
}

// Own makes this process the journal's owner in the given mode and returns
// the release. It does not wait: when another process owns the journal it
// returns a *HeldError naming it.
func Own(root *host.Root, mode string) (release func(), err error) {
	dir, err := root.OwnStateDir()
	if err != nil {
		return nil, err
	}
	f, err := root.OpenOwn(filepath.Join(dir, ownerFileName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal owner file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := root.ReadOwn(f.Name())
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &HeldError{Dir: dir, Owner: parseOwner(string(b))}
		}
		return nil, fmt.Errorf("lock journal owner file: %w", err)
	}
	name, _ := os.Hostname()
	me := fmt.Sprintf("mode=%s\npid=%d\nname=%s\nsince=%s\n", mode, hostPID(root), name, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(me), 0)
	}
	_ = os.Remove(filepath.Join(dir, legacyLockName))
	mu := &sync.Mutex{}
	owned.Lock()
	owned.dirs[dir] = mu
	owned.Unlock()
	return func() {
		mu.Lock() // an operation of ours in flight ends first
		defer mu.Unlock()
		owned.Lock()
		delete(owned.dirs, dir)
		owned.Unlock()
		f.Close()
	}, nil
}

// Lock holds the journal for one engine operation (Apply, Revert) and
// returns the unlock. In a process that owns the journal (Own) it waits for
// this process's other operations; elsewhere (a test, a tool that never
// calls Own) it takes the owner lock itself for the operation, waiting for
// whoever holds it.
func Lock(root *host.Root) (unlock func(), err error) {
	dir, err := root.OwnStateDir()
	if err != nil {
		return nil, err
	}
	owned.Lock()
	mu := owned.dirs[dir]
	owned.Unlock()
	if mu != nil {
		mu.Lock()
		owned.Lock()
		still := owned.dirs[dir] == mu
		owned.Unlock()
		if still {
			return mu.Unlock, nil
		}
		mu.Unlock() // released meanwhile: take the lock below
	}
	f, err := root.OpenOwn(filepath.Join(dir, ownerFileName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal owner file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock journal: %w", err)
	}
	return func() { f.Close() }, nil
}

// OwnWait is Own for the long-running agent: while another process (a
// one-shot command, or the previous agent pod on its way out) owns the
// journal it calls waiting once and retries every interval until ctx ends.
func OwnWait(ctx context.Context, root *host.Root, mode string, interval time.Duration, waiting func(*HeldError)) (func(), error) {
	told := false
	for {
		release, err := Own(root, mode)
		var held *HeldError
		if !errors.As(err, &held) {
			return release, err
		}
		if !told {
			told = true
			waiting(held)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", held, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// hostPID is this process's pid in the host root's /proc (the link
// /proc/self names it), so an SRE on the node can find the owner.
func hostPID(root *host.Root) int {
	if s, err := os.Readlink(root.Proc("self")); err == nil {
		if pid, err := strconv.Atoi(s); err == nil {
			return pid
		}
	}
	return os.Getpid()
}

func parseOwner(s string) Owner {
	var o Owner
	for _, line := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "mode":
			o.Mode = v
		case "pid":
			o.PID, _ = strconv.Atoi(v)
		case "name":
			o.Name = v
		case "since":
			o.Since, _ = time.Parse(time.RFC3339, v)
		}
	}
	return o
}
