package rtsched

import (
	"fmt"
	"strconv"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/podcgroup"
)

// StartedOriginal is the original of a container's first thread that the
// agent's NRI plugin started real-time (process.scheduler at
// CreateContainer): what the OCI runtime starts a process with when the
// spec names no scheduler, SCHED_OTHER at nice 0.
const StartedOriginal = "other:0"

// Started is the journal entry of a container's first thread (pid, in the
// host root's /proc) that the agent's NRI plugin gave v at its creation: the
// agent's own write, made through the runtime, so revert and a withdrawn
// grant restore it to StartedOriginal where the thread still holds v, and
// leave it where someone else changed it since. Its ID is the one the file
// path gives that thread's knob (PodID), so a pass that finds the thread
// granted keeps this original instead of journaling v as one. The thread
// must hold v now: one that does not was not started so by this plugin's
// adjustment (an OCI runtime that ignores process.scheduler), and nothing
// is ours to restore.
func Started(root *host.Root, pod podcgroup.Pod, pid int, v Value) (journal.Entry, error) {
	if pid <= 0 {
		return journal.Entry{}, fmt.Errorf("container of pod %s/%s started real-time: the runtime reported no pid (%d)", pod.Namespace, pod.Name, pid)
	}
	st, err := readStat(root.Proc(strconv.Itoa(pid), "stat"))
	if err != nil {
		return journal.Entry{}, fmt.Errorf("container of pod %s/%s started real-time: %w", pod.Namespace, pod.Name, err)
	}
	path := threadPath(pid, st.start)
	got, err := Read(root, path)
	if err != nil {
		return journal.Entry{}, fmt.Errorf("container of pod %s/%s started real-time: %w", pod.Namespace, pod.Name, err)
	}
	if got != v.String() {
		return journal.Entry{}, fmt.Errorf("container of pod %s/%s: its process %d runs %s, not the %s the agent asked the runtime for; not the agent's to restore",
			pod.Namespace, pod.Name, pid, got, v)
	}
	return journal.Entry{ID: PodID(pod) + "/" + path[len(pathPrefix):], Kind: Access.Name, Path: path,
		Original: StartedOriginal, Written: []string{v.String()}}, nil
}

// JournalStarted journals the thread the NRI plugin started real-time
// (Started) through adopt (the engine's Adopt). When the journal cannot
// take it, the thread is put back to StartedOriginal at once, before its
// container runs: a real-time policy the node could not restore later is
// never left behind. The file path gives it the policy again, journaled,
// on its next pass while the grant holds.
func JournalStarted(root *host.Root, adopt func(journal.Entry) error, pod podcgroup.Pod, pid int, v Value) error {
	en, err := Started(root, pod, pid, v)
	if err != nil {
		return err
	}
	if err := adopt(en); err != nil {
		if werr := Write(root, en.Path, StartedOriginal); werr != nil {
			return fmt.Errorf("journaling %s: %w; and putting it back to %s failed: %w", en.ID, err, StartedOriginal, werr)
		}
		return fmt.Errorf("journaling %s: %w; put back to %s", en.ID, err, StartedOriginal)
	}
	return nil
}
