// Command latencytier is the single binary of the operator: "manager" runs
// the controller, "agent" runs the privileged node agent (one image for both).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"latencytier.io/latencytier/agent"
	"latencytier.io/latencytier/controllers"
	"latencytier.io/latencytier/internal/buildinfo"
	"latencytier.io/latencytier/internal/cli"
	"latencytier.io/latencytier/internal/uninstall"
)

// version is stamped by the Makefile (-ldflags -X main.version=...).
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, newRoot(), os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// newRoot is the whole command tree: every subcommand and its flags.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:     "latencytier",
		Short:   "Tune latency-tier Kubernetes nodes and measure what they deliver",
		Version: version,
		RunE: func(*cobra.Command, []string) error {
			return &cli.UsageError{Err: errors.New("missing subcommand: manager, agent, uninstall or version")}
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = true
	manager, agentCmd := controllers.NewManagerCommand(), agent.NewCommand()
	// Both serve metrics from controller-runtime's registry; each says what
	// runs there with latencytier_build_info (docs/metrics.md).
	for role, cmd := range map[string]*cobra.Command{"manager": manager, "agent": agentCmd} {
		cmd.PreRunE = func(*cobra.Command, []string) error { return buildinfo.Register(ctrlmetrics.Registry, role, version) }
	}
	root.AddCommand(manager, agentCmd, uninstall.NewCommand(), &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version) },
	})
	return cli.Setup(root)
}
