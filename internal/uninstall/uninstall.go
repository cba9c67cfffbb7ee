// Package uninstall is "latencytier uninstall": it reverts every node
// before latencytier's own objects are removed. It deletes every
// LatencyProfile and waits while the manager, still running, turns their
// nodes' LatencyNodes to Revert, the agents restore the originals, and the
// manager releases the revert finalizers and removes the LatencyNodes, its
// node labels (so the agents leave the nodes) and its taints. Only then may the
// manager, the agents and the CRDs go: removed first, a profile would keep
// its finalizer forever and its nodes their tuning.
//
// The Helm chart runs it as a pre-delete hook Job; `make undeploy` runs it
// from the workstation before `kubectl delete -k config/default`.
package uninstall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/cli"
)

// Options shape a run.
type Options struct {
	// Timeout bounds the whole wait; 0 waits until ctx ends.
	Timeout time.Duration
	// Poll is how often the remaining objects are listed (1s when 0).
	Poll time.Duration
	// Out receives one progress line per change in what remains.
	Out io.Writer
}

// ErrStuck is returned when profiles or LatencyNodes remain at the timeout.
var ErrStuck = errors.New("not every node reverted")

// Run deletes every LatencyProfile and waits until no LatencyProfile and no
// LatencyNode is left. A cluster without the CRDs (nothing installed, or
// already removed) is done at once.
func Run(ctx context.Context, c client.Client, o Options) error {
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	var profiles v1alpha1.LatencyProfileList
	if err := c.List(ctx, &profiles); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			fmt.Fprintln(o.Out, "no LatencyProfile CRD: nothing to revert")
			return nil
		}
		return fmt.Errorf("listing LatencyProfiles: %w", err)
	}
	for i := range profiles.Items {
		p := &profiles.Items[i]
		if err := c.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting LatencyProfile %s: %w", p.Name, err)
		}
		fmt.Fprintf(o.Out, "deleted LatencyProfile %s: its nodes revert\n", p.Name)
	}
	last := ""
	for {
		left, err := remaining(ctx, c)
		if err != nil && ctx.Err() != nil {
			// The timeout ran out during a read: what was left at
			// the last look is the answer, not the interrupted read.
			return stuck(last, ctx.Err())
		}
		if err != nil {
			return err
		}
		if left == "" {
			fmt.Fprintln(o.Out, "every node reverted: no LatencyProfile or LatencyNode left")
			return nil
		}
		if left != last {
			fmt.Fprintln(o.Out, "waiting for "+left)
			last = left
		}
		select {
		case <-ctx.Done():
			return stuck(left, ctx.Err())
		case <-time.After(o.Poll):
		}
	}
}

// stuck is ErrStuck naming what is left.
func stuck(left string, err error) error {
	return fmt.Errorf("%w: %s left (is the manager running? a NotReady node is given up after its --node-unreachable-timeout): %v", ErrStuck, left, err)
}

// remaining describes the profiles and LatencyNodes still there, "" none.
func remaining(ctx context.Context, c client.Client) (string, error) {
	var profiles v1alpha1.LatencyProfileList
	if err := c.List(ctx, &profiles); err != nil {
		return "", fmt.Errorf("listing LatencyProfiles: %w", err)
	}
	var nodes v1alpha1.LatencyNodeList
	if err := c.List(ctx, &nodes); err != nil {
		return "", fmt.Errorf("listing LatencyNodes: %w", err)
	}
	// The manager takes its tuning-pending taint off a node once the
	// node's LatencyNode is gone (controllers/taint.go), and its
	// contention taint once the node's profile is being deleted
	// (controllers/contention_taint.go): wait for those too, or the node
	// would keep refusing (or steering away) the tier's pods after the
	// manager is removed.
	var all corev1.NodeList
	if err := c.List(ctx, &all); err != nil {
		return "", fmt.Errorf("listing nodes: %w", err)
	}
	ours := []string{v1alpha1.TuningPendingTaint, v1alpha1.ContentionTaint}
	tainted := map[string][]string{}
	for _, n := range all.Items {
		for _, t := range n.Spec.Taints {
			if slices.Contains(ours, t.Key) {
				tainted[t.Key] = append(tainted[t.Key], n.Name)
			}
		}
	}
	var parts []string
	if len(profiles.Items) > 0 {
		names := make([]string, 0, len(profiles.Items))
		for _, p := range profiles.Items {
			names = append(names, p.Name)
		}
		parts = append(parts, "LatencyProfiles "+bounded(names))
	}
	if len(nodes.Items) > 0 {
		names := make([]string, 0, len(nodes.Items))
		for _, n := range nodes.Items {
			names = append(names, n.Name+" ("+string(n.Spec.Action)+")")
		}
		parts = append(parts, "LatencyNodes "+bounded(names))
	}
	for _, key := range ours {
		if names := tainted[key]; len(names) > 0 {
			parts = append(parts, "the "+key+" taint on nodes "+bounded(names))
		}
	}
	return strings.Join(parts, "; "), nil
}

// bounded joins up to five names sorted, counting the rest.
func bounded(names []string) string {
	sort.Strings(names)
	const most = 5
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}

// Main is "latencytier uninstall [flags]" with args, printing progress to out.
func Main(ctx context.Context, args []string, out io.Writer) error {
	c := cli.Setup(NewCommand())
	c.SetOut(out)
	return cli.Run(ctx, c, args)
}

// NewCommand is "latencytier uninstall".
func NewCommand() *cobra.Command {
	var timeout time.Duration
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "uninstall [flags]",
		Short: "Delete every LatencyProfile and wait until every node is reverted (run before removing the operator)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), kubeconfig, timeout, cmd.OutOrStdout())
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for every node to revert (0: no limit)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)")
	return cmd
}

// Scheme holds every kind Run reads: profiles, LatencyNodes and Nodes (the
// tuning-pending taint).
func Scheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	utilruntime.Must(corev1.AddToScheme(scheme))
	return scheme
}

func run(ctx context.Context, kubeconfig string, timeout time.Duration, out io.Writer) error {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = config.GetConfig()
	}
	if err != nil {
		return fmt.Errorf("uninstall: loading kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	return Run(ctx, c, Options{Timeout: timeout, Out: out})
}
