package systemd

import "time"

// SetCallTimeout shortens callTimeout for a test and returns the undo.
func SetCallTimeout(d time.Duration) func() {
	old := callTimeout
	callTimeout = d
	return func() { callTimeout = old }
}
