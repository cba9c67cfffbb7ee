package systemd

import "time"

// SetCallTimeout shortens callTimeout for a test and returns the undo.
func SetCallTimeout(d time.Duration) func() {
	old := callTimeout
	callTimeout = d
	return func() { callTimeout = old }
}

// The AllowedCPUs mask codec, for the tests of the systemd_test package.
var (
	ToMask   = toMask
	FromMask = fromMask
)
