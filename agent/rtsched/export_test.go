package rtsched

// ParseValue lets the external real-kernel test (package rtsched_test,
// which imports apply and so cannot live inside rtsched) read a journaled
// original.
var ParseValue = parseValue
