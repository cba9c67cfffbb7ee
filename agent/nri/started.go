package nri

import (
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/rtsched"
)

// JournalFunc journals the first thread (pid, the host's) of a container
// of pod that the plugin gave the real-time policy v at its creation, so
// the node restores it when the grant goes even if no pass of the agent
// ever saw the container granted (rtsched.JournalStarted over the engine's
// Adopt). It may block on the journal's lock; the plugin bounds its wait.
type JournalFunc func(pod podcgroup.Pod, pid int, v rtsched.Value) error

// WithRealtimeJournal lets the plugin set a real-time policy at creation:
// f journals each container it set one on, at StartContainer (the first
// moment the runtime has a process for it, before the container runs).
// Without it the plugin sets none: the node restores what it set, and a
// policy nobody journaled would outlive its grant.
func WithRealtimeJournal(f JournalFunc) Option { return func(p *Plugin) { p.journalRT = f } }

// maxStarted bounds the containers given a real-time policy at creation
// and not yet started; past it the plugin sets no more policies (the file
// path does) until some start.
const maxStarted = 1024

// startedRT is a container the plugin gave a real-time policy at creation.
type startedRT struct {
	pod podcgroup.Pod
	v   rtsched.Value
}

// giveRT notes that ctr of pod is about to be created with v, for its
// StartContainer; false when the plugin journals no policies or holds
// maxStarted of them: then it must not set one.
func (p *Plugin) giveRT(pod *api.PodSandbox, ctr *api.Container, v rtsched.Value) bool {
	if p.journalRT == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rtGiven == nil {
		p.rtGiven = map[string]startedRT{}
	}
	if _, ok := p.rtGiven[ctr.GetId()]; !ok && len(p.rtGiven) >= maxStarted {
		return false
	}
	p.rtGiven[ctr.GetId()] = startedRT{pod: podcgroup.Pod{UID: pod.GetUid(), Namespace: pod.GetNamespace(), Name: pod.GetName()}, v: v}
	return true
}

// takeRT returns and forgets what giveRT noted for container id.
func (p *Plugin) takeRT(id string) (startedRT, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.rtGiven[id]
	delete(p.rtGiven, id)
	return s, ok
}

// journalStarted journals ctr's first thread when the plugin gave it a
// real-time policy at creation. The runtime waits for the answer before it
// starts the container, so the wait is bounded (p.bound): a journal held
// longer by a pass is written when the pass lets go, and the container
// starts meanwhile (fail open). A failure is logged; JournalStarted has
// then put the thread back to SCHED_OTHER, and the file path sets the
// policy, journaled, while the grant holds.
func (p *Plugin) journalStarted(pod *api.PodSandbox, ctr *api.Container) {
	s, ok := p.takeRT(ctr.GetId())
	if !ok {
		return
	}
	pid := int(ctr.GetPid())
	done := make(chan error, 1)
	go func() { done <- p.journalRT(s.pod, pid, s.v) }()
	log := p.log.WithValues("pod", pod.GetNamespace()+"/"+pod.GetName(), "container", ctr.GetName(), "pid", pid, "sched", s.v.String())
	select {
	case err := <-done:
		p.logJournaled(log, err)
	case <-time.After(p.bound):
		log.Info("Journaling a container started real-time in the background: the journal is busy", "bound", p.bound.String())
		go func() { p.logJournaled(log, <-done) }()
	}
}

func (p *Plugin) logJournaled(log logr.Logger, err error) {
	if err != nil {
		log.Error(err, "Could not journal a container started real-time; the file path sets its policy while the grant holds")
		return
	}
	log.Info("Journaled a container started real-time: the node restores it when the grant goes")
}
