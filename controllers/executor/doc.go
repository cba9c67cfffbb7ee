// Package executor performs the manager's writes (issue 42): each field
// the manager writes has one function here that writes it, under its own
// field manager (writers.go), and the reconcilers in controllers/ call it
// with what they decided (the planner's, the rollout's and the status's
// plans). It decides nothing: which taint, which record, which spec, which
// node to cordon or drain comes in from the caller; how the write goes
// out (the patch type, its precondition, the retry on a conflict, the
// bound on writes in flight) is decided here, once.
//
// It imports no package of controllers/ above it (controllers/imports_test.go
// fails when it does): the reconcilers import the executor, never the
// other way round.
package executor
