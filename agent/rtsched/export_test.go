package rtsched

// ParseValue lets the external real-kernel test (package rtsched_test,
// which imports apply and so cannot live inside rtsched) read a journaled
// original.
var ParseValue = parseValue

// SameNamespace lets the external hostPID test run the agent's namespace
// check.
var SameNamespace = sameNamespace

// ErrOtherNamespace is the refusal the hostPID test expects.
var ErrOtherNamespace = errOtherNamespace
