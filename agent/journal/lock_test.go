package journal

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
)

// One lock guards the journal: an engine operation in a process that does
// not own the journal waits for the owner (another process, here another
// Root on the same directory standing for it: flock locks of two open files
// exclude each other like two processes'), and an owner's own operations
// take turns without waiting for themselves. Owning removes the
// journal.lock an older agent left.
func TestOneLockGuardsTheJournal(t *testing.T) {
	root := testroot.New(t, nil)
	legacy := filepath.Join(root.StateDir(), legacyLockName)
	testroot.Write(t, legacy, "")
	release, err := Own(root, ModeAgent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Errorf("the owner left the old journal.lock: %v", err)
	}
	unlock, err := Lock(host.New(root.Dir())) // the owner's own operation
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan struct{})
	go func() {
		u, err := Lock(root)
		if err == nil {
			u()
		}
		close(second)
	}()
	select {
	case <-second:
		t.Fatal("two of the owner's operations held the journal at once")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	<-second

	// A process that never owned the journal: its operation waits until
	// the owner is gone.
	owned.Lock()
	mu := owned.dirs[root.StateDir()]
	delete(owned.dirs, root.StateDir()) // as seen from another process
	owned.Unlock()
	other := make(chan struct{})
	go func() {
		u, err := Lock(root)
		if err == nil {
			u()
		}
		close(other)
	}()
	select {
	case <-other:
		t.Fatal("an operation ran while another process owns the journal")
	case <-time.After(100 * time.Millisecond):
	}
	owned.Lock()
	owned.dirs[root.StateDir()] = mu
	owned.Unlock()
	release()
	select {
	case <-other:
	case <-time.After(5 * time.Second):
		t.Fatal("the operation still waits after the owner left")
	}
}
