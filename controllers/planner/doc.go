// Package planner decides a node's life under a profile: selection,
// apply, verification, canary, rollback, the managed reboot (draining,
// rebooting, rejoining), release and revert, as one state machine
// (Machine) and pure functions from what a pass read to what it does
// next and which fields that writes. It owns no client and imports none
// (controllers/imports_test.go fails when it does): the reconcilers in controllers/
// read, call it, and carry the writes out.
//
// Issue 42's first slice: the reboot and release decisions live here, and
// node selection (which profile owns a node: selection.go); the rollout's
// moves and the selection's writes are rows of Machine still decided in
// controllers/ (their Decider says where).
package planner
