package v1alpha1

import "time"

// StaleHeartbeats is how many heartbeat intervals an agent may stay silent
// before its report is stale. The manager's node state, kubectl latency,
// alert LatencyTierNodeStatusStale and the dashboard's "stale after" line
// all count this many (the alert and the line add a minute of grace;
// config/grafana's TestStaleThresholdIsOneConstant holds them to it).
const StaleHeartbeats = 2

// StaleAfter is when the agent's report turns stale: reportedAt plus
// StaleHeartbeats heartbeatIntervals. ok is false when the agent sets either field not (an
// agent from before heartbeats, whose node is never shown stale). The
// manager's node states and kubectl latency both use it.
func (s *LatencyNodeStatus) StaleAfter() (at time.Time, ok bool) {
	if s.ReportedAt == nil || s.HeartbeatInterval == nil || s.HeartbeatInterval.Duration <= 0 {
		return time.Time{}, false
	}
	return s.ReportedAt.Add(StaleHeartbeats * s.HeartbeatInterval.Duration), true
}

// StaleAt reports whether the agent's report is stale at now.
func (s *LatencyNodeStatus) StaleAt(now time.Time) bool {
	at, ok := s.StaleAfter()
	return ok && !now.Before(at)
}
