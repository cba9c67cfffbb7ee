//go:build privileged

package rtsched

import (
	"testing"
	"time"

	"latencytier.io/latencytier/internal/privtest"
)

// The real /dev/kmsg ends in EAGAIN, not EOF: reading it must return, not
// wait for the next kernel message.
func TestKmsgReadReturnsAtTheEnd(t *testing.T) {
	privtest.Root(t)
	done := make(chan bool)
	go func() { done <- kmsgHas("/dev/kmsg", "no such kernel message: latencytier test") }()
	select {
	case found := <-done:
		if found {
			t.Error("found a message that was never logged")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading /dev/kmsg did not return at the end of the log")
	}
}
