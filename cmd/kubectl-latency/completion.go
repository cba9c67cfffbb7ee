package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Shell completion is cobra's: "kubectl latency completion bash|zsh|fish|
// powershell" prints the script for kubectl-latency, and kubectl (1.26+)
// completes "kubectl latency ..." through the kubectl_complete-latency
// executable the release archives carry next to the plugin, which asks
// "kubectl-latency __complete". Names come from the cluster the flags on
// the command line point at; with none reachable nothing is offered.

// completionTimeout bounds the list a completion makes: a shell waits on it.
const completionTimeout = 5 * time.Second

// completeProfiles completes a LatencyProfile name (the first argument).
func completeProfiles(connect connectFunc) cobra.CompletionFunc {
	return completeNames(connect, func(ctx context.Context, c client.Client) ([]string, error) {
		var l v1alpha1.LatencyProfileList
		if err := c.List(ctx, &l); err != nil {
			return nil, err
		}
		names := make([]string, 0, len(l.Items))
		for _, p := range l.Items {
			names = append(names, p.Name)
		}
		return names, nil
	})
}

// completeNodes completes a LatencyNode name (a node latencytier tunes).
func completeNodes(connect connectFunc) cobra.CompletionFunc {
	return completeNames(connect, func(ctx context.Context, c client.Client) ([]string, error) {
		var l v1alpha1.LatencyNodeList
		if err := c.List(ctx, &l); err != nil {
			return nil, err
		}
		names := make([]string, 0, len(l.Items))
		for _, n := range l.Items {
			names = append(names, n.Name)
		}
		return names, nil
	})
}

func completeNames(connect connectFunc, names func(context.Context, client.Client) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := connect()
		if err != nil {
			cobra.CompDebugln("connecting: "+err.Error(), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		all, err := names(ctx, c)
		if err != nil {
			cobra.CompDebugln("listing: "+err.Error(), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, n := range all {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeWords completes a flag from a fixed list.
func completeWords(words ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return words, cobra.ShellCompDirectiveNoFileComp
	}
}
