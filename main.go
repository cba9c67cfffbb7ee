// Command latencytier is the single binary of the operator: "manager" runs
// the controller, "agent" runs the privileged node agent (one image for both).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"latencytier.io/latencytier/agent"
	"latencytier.io/latencytier/controllers"
	"latencytier.io/latencytier/internal/uninstall"
)

// version is stamped by the Makefile (-ldflags -X main.version=...).
var version = "dev"

const usage = `latencytier: tune latency-tier Kubernetes nodes and measure what they deliver.

Usage:
  latencytier manager [flags]          run the controller (see -h)
  latencytier agent [flags]            run the node agent (see -h)
  latencytier agent plan [flags]       print what the agent would change on this host
  latencytier agent measure [flags]    measure run-queue latency here, runqlat-style
  latencytier uninstall [flags]        delete every LatencyProfile and wait until every node is reverted
  latencytier version                  print the version
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "latencytier:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("missing subcommand")
	}
	switch args[0] {
	case "manager":
		return controllers.RunManager(ctx, args[1:])
	case "agent":
		return agent.Main(ctx, args[1:])
	case "uninstall":
		return uninstall.Main(ctx, args[1:], os.Stdout)
	case "version", "--version":
		fmt.Println(version)
		return nil
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown subcommand %q", args[0])
	}
}
