package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// listFlags are kubectl get's list flags (--no-headers, -l, -w,
// --sort-by), each added only to the commands it means something to; a
// command's help says which it lacks and why.
type listFlags struct {
	noHeaders bool
	selector  string
	watch     bool
	sortBy    string
	sel       labels.Selector // selector, parsed by validate
}

func (f *listFlags) addNoHeaders(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "Print the table without its header lines")
}

func (f *listFlags) addSelector(cmd *cobra.Command, what string) {
	note := ""
	if what == "LatencyNodes" {
		note = " (the manager sets none on them: not the Node's labels)"
	}
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "",
		"Label selector on the "+what+"' own labels"+note+", as kubectl get -l: -l key1=value1,key2!=value2, -l 'env in (prod)'")
	_ = cmd.RegisterFlagCompletionFunc("selector", cobra.NoFileCompletions)
}

func (f *listFlags) addWatch(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&f.watch, "watch", "w", false,
		"After the table, print each row again when it changes (as kubectl get -w), until interrupted")
}

func (f *listFlags) addSortBy(cmd *cobra.Command, keys []string) {
	cmd.Flags().StringVar(&f.sortBy, "sort-by", "",
		"Sort rows by a column: one of "+strings.Join(keys, ", ")+"; durations, counts and ratios highest first, text A to Z, \"-\" last; ties keep the command's order")
	_ = cmd.RegisterFlagCompletionFunc("sort-by", completeWords(keys...))
}

// validateSelector parses -l, failing with an error that names the flag.
func (f *listFlags) validateSelector() error {
	sel, err := labels.Parse(f.selector)
	if err != nil {
		return fmt.Errorf("--selector %q: %w", f.selector, err)
	}
	f.sel = sel
	return nil
}

// listOptions select by -l (everything without it).
func (f *listFlags) listOptions() []client.ListOption {
	if f.sel == nil || f.sel.Empty() {
		return nil
	}
	return []client.ListOption{client.MatchingLabelsSelector{Selector: f.sel}}
}
