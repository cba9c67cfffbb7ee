// Command kubectl-latency is a kubectl plugin ("kubectl latency") that
// answers per-node latency questions from LatencyProfiles and LatencyNodes:
// status (profile → nodes → settings, worst first, with each node's
// before/after run-queue latency), explain NODE and top (nodes by p99).
//
// It is its own binary, not a subcommand of the latencytier binary, because
// kubectl finds plugins by executable name (kubectl-latency on PATH) and
// because cli-runtime and cobra have no business in the image the manager
// and the privileged agent run from.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := newRootCommand(streams).Execute(); err != nil {
		os.Exit(1)
	}
}

// newRootCommand builds "kubectl latency" with kubectl's connection flags
// (--kubeconfig, --context, --server, --token, ...).
func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:           "kubectl-latency",
		Short:         "Run-queue latency and tuning of latency-tier nodes",
		Long:          "kubectl latency reads LatencyProfiles and LatencyNodes (tuning.latencytier.io) and shows per node what the profile changed, what the kernel reports and what latency the node delivers.",
		SilenceUsage:  true,
		SilenceErrors: false,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl latency"},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	flags.AddFlags(root.PersistentFlags())
	connect := func() (client.Client, error) { return newClient(flags) }
	root.AddCommand(
		command("status [PROFILE]", "Profiles, their nodes (worst first, before/after p99) and the settings that do not hold",
			cobra.MaximumNArgs(1), streams.Out, connect, status),
		command("explain NODE", "One node: findings, budget, what the profile changed and what the kernel reports",
			cobra.ExactArgs(1), streams.Out, connect, explainNode),
		newTopCommand(streams.Out, connect),
	)
	return root
}

// newClient makes a client for the latencytier API from kubectl's flags.
func newClient(flags *genericclioptions.ConfigFlags) (client.Client, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// connectFunc returns a client when a command runs (not when it is built,
// so --help needs no cluster).
type connectFunc func() (client.Client, error)

// command is what every subcommand shares: connect, then print to out.
func command(use, short string, args cobra.PositionalArgs, out io.Writer, connect connectFunc,
	run func(ctx context.Context, c client.Client, out io.Writer, args []string) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := connect()
			if err != nil {
				return err
			}
			return run(cmd.Context(), c, out, args)
		},
	}
}
