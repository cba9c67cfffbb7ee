package fleetsim

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// The simulated agents run on the control plane's CPUs here, and a real
// fleet's agents do not: each runs on its own node. Sharing the two CPUs
// as equals, the agents' passes and windows (0.58 cores in a 3000-node
// create) took CPU from the API server they are measuring it against, the
// phases lasted longer, more of each node's measurement windows fell in
// them and the API server's garbage collector fell behind (its assists
// grew with the fleet): a run measured the simulation as much as the
// control plane (issue 43). So, once the API server, etcd and the manager
// have started, the simulator lowers its own threads to AgentsNice: they
// get the CPU the control plane leaves, the control plane what it asks
// for. Threads the Go runtime starts later inherit it from the thread
// that starts them; the processes started before keep theirs.

// lowerOwnPriority sets the nice of every thread of this process to nice
// and returns how many threads it set and a func that sets them back to
// the calling thread's nice from before, which the next fleet's control
// plane, started by this process, then inherits. Linux's
// setpriority(PRIO_PROCESS, tid) sets one thread, so it goes over
// /proc/self/task until a round finds no thread left to set.
func lowerOwnPriority(nice int) (int, func(), error) {
	orig := ownNice()
	if nice == orig {
		return 0, func() {}, nil
	}
	n, err := setOwnThreads(nice)
	return n, func() { _, _ = setOwnThreads(orig) }, err
}

// ownNice is the calling thread's nice (Linux's getpriority system call
// returns 20 - nice).
func ownNice() int {
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return 0
	}
	return 20 - prio
}

func setOwnThreads(nice int) (int, error) {
	done := map[int]bool{}
	for round := 0; round < 10; round++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return len(done), err
		}
		fresh := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil {
				if os.IsNotExist(err) || err == syscall.ESRCH {
					continue // the thread ended
				}
				return len(done), fmt.Errorf("setpriority of thread %d to %d: %w", tid, nice, err)
			}
			done[tid] = true
			fresh++
		}
		if fresh == 0 {
			return len(done), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return len(done), nil
}
