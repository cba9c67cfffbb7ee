// Command fake stands in for latencytier and kubectl-latency in
// hack/release's test: a static Go executable for the platform it is
// built for, stamped with -X main.version like the real ones, embedding the
// file the test puts next to it as bpf.o, answering `version` (as the
// binary it is named after does) and `agent --help`.
package main

import (
	_ "embed"
	"os"
	"path/filepath"
	"runtime"
)

var version = "dev"

//go:embed bpf.o
var bpfObject string

func main() {
	args := os.Args[1:]
	switch {
	case len(args) == 1 && args[0] == "version" && filepath.Base(os.Args[0]) == "kubectl-latency":
		os.Stdout.WriteString("kubectl-latency " + version + " (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n")
	case len(args) == 1 && args[0] == "version":
		os.Stdout.WriteString(version + "\n")
	case len(args) == 2 && args[0] == "agent" && args[1] == "--help":
		os.Stdout.WriteString("Usage:\n  latencytier agent --node-name N [flags]\n")
	case len(args) == 1 && args[0] == "bpf":
		os.Stdout.WriteString(bpfObject)
	default:
		os.Exit(2)
	}
}
