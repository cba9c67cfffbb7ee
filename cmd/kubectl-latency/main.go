// Command kubectl-latency is a kubectl plugin ("kubectl latency") that
// answers per-node latency questions from LatencyProfiles and LatencyNodes:
// status (profile → nodes → settings, worst first, with each node's
// before/after run-queue latency), explain NODE, top (nodes by p99) and
// boot (the boot-parameter plan per node),
// each also as -o json|yaml (and kubectl's other object formats) through
// cli-runtime's printers, with kubectl get's --no-headers, -l, -w and
// --sort-by where they mean something (listflags.go); version; completion
// of its commands, flags, profile and node names (cobra's).
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
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := newRootCommand(streams).Execute(); err != nil {
		os.Exit(1)
	}
}

// newRootCommand builds "kubectl latency" with kubectl's connection flags
// (--kubeconfig, --context, --server, --token, ...) but --namespace: both
// kinds are cluster-scoped, so a namespace would mean nothing.
func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	flags.Namespace = nil
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
	connect := func() (client.WithWatch, error) { return newClient(flags) }
	root.AddCommand(
		newStatusCommand(streams.Out, connect),
		newExplainCommand(streams.Out, connect),
		newTopCommand(streams.Out, connect),
		newBootCommand(streams.Out, connect),
		newVersionCommand(streams.Out),
	)
	for _, c := range root.Commands() {
		c.Example = examples[c.Name()]
	}
	return root
}

// examples are each command's Examples in its help (--help), as kubectl's
// own commands show them; TestEveryCommandHasExamples parses each with the
// command's flags.
var examples = map[string]string{
	"status": `  # Every profile, its nodes worst first, before/after p99 and the verdicts
  kubectl latency status

  # The profiles labelled team=payments, without the header lines
  kubectl latency status -l team=payments --no-headers

  # One profile, with the revision and the pods' p99 (-o wide)
  kubectl latency status gateway -o wide

  # The profile and its LatencyNodes as objects
  kubectl latency status gateway -o yaml`,
	"explain": `  # Why a node is slow: findings, budget, settings, kernel, who made pods wait
  kubectl latency explain worker-7

  # The node's LatencyNode as JSON, or one field of it
  kubectl latency explain worker-7 -o json
  kubectl latency explain worker-7 -o jsonpath='{.status.summary.p99}'`,
	"top": `  # Nodes by run-queue p99 over every CPU, highest first
  kubectl latency top

  # By the p99 of the isolated CPUs, with the budget and throttling columns
  kubectl latency top --class Isolated -o wide

  # The LatencyNodes labelled zone=a, by throttled ratio, without headers (for a script)
  kubectl latency top -l zone=a --sort-by=throttled --no-headers

  # Keep watching: each node's row again whenever it changes, until Ctrl-C
  kubectl latency top -w --sort-by=p99`,
	"boot": `  # The boot-parameter plan of every node that has one
  kubectl latency boot

  # One profile's nodes: which kernel arguments each lacks and why, and reboots in progress
  kubectl latency boot gateway

  # Follow a rollout's reboots: a node's rows again whenever its plan or reboot changes
  kubectl latency boot gateway -w

  # The nodes that lack the most arguments first
  kubectl latency boot --sort-by=missing`,
	"version": `  # The plugin's version
  kubectl latency version`,
}

// newClient makes a client for the latencytier API from kubectl's flags.
func newClient(flags *genericclioptions.ConfigFlags) (client.WithWatch, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme})
}

// connectFunc returns a client when a command runs (not when it is built,
// so --help needs no cluster).
type connectFunc func() (client.WithWatch, error)

// andThen runs first, then, if it passed, next (cobra takes one PreRunE).
func andThen(first, next func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := first(cmd, args); err != nil {
			return err
		}
		return next(cmd, args)
	}
}

// command is what every subcommand shares: -o, then, before any request,
// the validation of -o and of whatever else validate checks; connect; run,
// printing to out. complete, if set, completes the positional argument.
func command(use, short string, args cobra.PositionalArgs, out io.Writer, connect connectFunc, o *output,
	complete cobra.CompletionFunc, run func(ctx context.Context, c client.WithWatch, out io.Writer, args []string) error,
	validate ...func() error) *cobra.Command {
	cmd := &cobra.Command{
		Use: use, Short: short, Args: args, ValidArgsFunction: complete,
		PreRunE: func(*cobra.Command, []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			for _, v := range validate {
				if err := v(); err != nil {
					return err
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := connect()
			if err != nil {
				return err
			}
			return run(cmd.Context(), c, out, args)
		},
	}
	if complete == nil {
		cmd.ValidArgsFunction = cobra.NoFileCompletions
	}
	o.addFlags(cmd)
	return cmd
}
