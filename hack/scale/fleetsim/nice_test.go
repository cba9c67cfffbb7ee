package fleetsim

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// threadNices is the nice of each of this process's threads, from field 19
// of /proc/self/task/<tid>/stat.
func threadNices(t *testing.T) map[int]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/stat")
		if err != nil {
			continue // the thread ended
		}
		// The command sits in parentheses and may hold spaces: fields
		// count from after its closing one (field 3 is the first).
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		tid, _ := strconv.Atoi(e.Name())
		if out[tid], err = strconv.Atoi(f[19-3]); err != nil {
			t.Fatalf("stat of thread %d: %v", tid, err)
		}
	}
	return out
}

// Every thread of the simulator runs at the agents' nice once lowered,
// threads started afterwards too, and at its nice from before again after
// restore (the next fleet's control plane inherits it).
func TestLowerOwnPriority(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setting a thread's nice back down needs root")
	}
	orig := ownNice()
	n, restore, err := lowerOwnPriority(orig + 7)
	t.Cleanup(restore)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no thread set")
	}
	before := len(threadNices(t))
	done := make(chan struct{})
	for range 8 { // goroutines blocked in system calls together make the runtime start threads
		go func() {
			ts := syscall.Timespec{Nsec: 50e6}
			_ = syscall.Nanosleep(&ts, nil)
			done <- struct{}{}
		}()
	}
	for range 8 {
		<-done
	}
	if after := len(threadNices(t)); after <= before {
		t.Fatalf("%d threads after the blocking calls, %d before: none started", after, before)
	}
	for tid, nice := range threadNices(t) {
		if nice != orig+7 {
			t.Errorf("thread %d at nice %d, want %d", tid, nice, orig+7)
		}
	}
	restore()
	for tid, nice := range threadNices(t) {
		if nice != orig {
			t.Errorf("after restore, thread %d at nice %d, want %d", tid, nice, orig)
		}
	}
}
