// Package rollout decides a profile's rollout from what a pass read: which
// nodes move to the target revision next (canaries first, maxInFlight at
// most unverified), each node's verdict against its baseline (judge), when
// to roll back or pause, and the status.rollout that records it (Decide).
// It owns no client and imports none (controllers/imports_test.go fails when it does):
// the profile reconciler reads the nodes (NodesOf), calls Decide, writes
// the plan's status in its one status patch and then the moves.
package rollout
