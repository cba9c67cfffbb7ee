package v1alpha1

import "time"

// StaleAfter is when the agent's report turns stale: reportedAt plus two
// heartbeatIntervals. ok is false when the agent sets either field not (an
// agent from before heartbeats, whose node is never shown stale). The
// manager's node states and kubectl latency both use it.
func (s *LatencyNodeStatus) StaleAfter() (at time.Time, ok bool) {
	if s.ReportedAt == nil || s.HeartbeatInterval == nil || s.HeartbeatInterval.Duration <= 0 {
		return time.Time{}, false
	}
	return s.ReportedAt.Add(2 * s.HeartbeatInterval.Duration), true
}

// StaleAt reports whether the agent's report is stale at now.
func (s *LatencyNodeStatus) StaleAt(now time.Time) bool {
	at, ok := s.StaleAfter()
	return ok && !now.Before(at)
}
