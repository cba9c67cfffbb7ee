// Package cli holds what every latencytier command shares on top of cobra:
// usage errors (a bad flag, an unknown subcommand, a stray argument) told
// apart from run errors, so the binary exits 2 for the first and 1 for the
// second, and 0 after -h/--help; and Run, which executes a command with
// exactly the arguments given (never os.Args), for the binary and for tests.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes of the binary.
const (
	ExitOK    = 0
	ExitError = 1
	// ExitUsage is a command line the binary does not accept, as Go's flag
	// package and most Unix tools exit.
	ExitUsage = 2
)

// UsageError is a command line the command does not accept.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// IsUsage reports whether err is a UsageError.
func IsUsage(err error) bool { return errors.As(err, new(*UsageError)) }

// Setup makes cmd and every subcommand report flag and argument errors as
// UsageErrors, print neither usage nor errors themselves (Execute does, once),
// and leave positional arguments refused unless a command sets its own Args.
func Setup(cmd *cobra.Command) *cobra.Command {
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{err} })
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Args == nil {
			c.Args = NoArgs
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
	return cmd
}

// NoArgs refuses positional arguments, naming the first: on a command with
// subcommands it is a subcommand that does not exist.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		return &UsageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
	}
	return &UsageError{fmt.Errorf("unexpected argument %q for %q", args[0], cmd.CommandPath())}
}

// Run executes cmd (set up by Setup) with args, exactly: a nil args is no
// arguments, not the process's.
func Run(ctx context.Context, cmd *cobra.Command, args []string) error {
	cmd.SetArgs(GoStyle(cmd, args))
	return cmd.ExecuteContext(ctx)
}

// GoStyle rewrites Go-flag-style long flags (-name, -name=value), which the
// commands accepted before they moved to cobra and scripts still pass
// (hack/bench: "agent measure -duration 60s"), to --name when name is a
// long flag of some command in cmd's tree. Single letters stay shorthands
// (-v, -h); nothing after "--" is touched. It never returns nil.
func GoStyle(cmd *cobra.Command, args []string) []string {
	long := map[string]bool{"help": true, "version": true}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { long[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && long[name] {
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}

// Execute runs cmd with args, prints an error to stderr and returns the
// process's exit code: ExitUsage (with a pointer to --help) for a command
// line it does not accept, ExitError when the command failed.
func Execute(ctx context.Context, cmd *cobra.Command, args []string, stderr io.Writer) int {
	cmd.SetArgs(GoStyle(cmd, args))
	c, err := cmd.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	name := cmd.Name()
	if IsUsage(err) {
		path := cmd.CommandPath()
		if c != nil {
			path = c.CommandPath()
		}
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", name, err, path)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, strings.TrimSpace(err.Error()))
	return ExitError
}
