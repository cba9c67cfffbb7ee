// Package profilestatus computes a LatencyProfile's status from what a
// pass read: each node's line (Pending, Applied, Degraded, Drifted,
// Conflicted, Reverting, Reverted, Unreachable, Stale) from its Node and
// LatencyNode, the counts and worst figures, and the Ready, Progressing
// and Degraded conditions (Compute). It owns no client and imports none
// (controllers/imports_test.go fails when it does), nor controllers/: the profile
// reconciler reads the Input, calls Compute and writes the result in its
// one status patch.
package profilestatus
