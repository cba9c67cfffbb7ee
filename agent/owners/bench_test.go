package owners

import (
	"testing"

	"latencytier.io/latencytier/agent/host"
)

// BenchmarkDetectHost is one pass's detection on this machine's real
// /proc, /sys and /etc with no pods: the process scan is most of it.
func BenchmarkDetectHost(b *testing.B) {
	root := host.New("/")
	for b.Loop() {
		Detect(root, Input{})
	}
}
