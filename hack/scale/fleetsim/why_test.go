package fleetsim

import "testing"

// TestWhyCounterCountsStatusWritesByReason checks the agents' logger counts
// the loop's status-write line by its reason and nothing else.
func TestWhyCounterCountsStatusWritesByReason(t *testing.T) {
	c := newWhyCounter()
	log := c.logger()
	before := c.snapshot()
	log.V(1).Info(statusWriteMsg, "why", "heartbeat", "settings", 9)
	log.V(1).Info(statusWriteMsg, "settings", 9, "why", "current")
	log.V(1).Info(statusWriteMsg, "why", "current")
	log.V(1).Info("Writing a measurement window into status without a pass")
	log.V(2).Info(statusWriteMsg, "why", "too verbose")
	log.WithValues("node", "n1").WithName("agent").V(1).Info(statusWriteMsg, "why", "first report")
	if got, want := since(before, c.snapshot()), "current 2, first report 1, heartbeat 1"; got != want {
		t.Errorf("counted %q, want %q", got, want)
	}
	if got := since(c.snapshot(), c.snapshot()); got != "none" {
		t.Errorf("no writes between two snapshots: %q", got)
	}
}
