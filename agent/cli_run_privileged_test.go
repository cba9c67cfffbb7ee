//go:build privileged

package agent

import (
	"context"
	"io"

	"latencytier.io/latencytier/internal/cli"
)

// oneShot runs "latencytier agent CMD args..." printing to out.
func oneShot(cmd string, args []string, out io.Writer) error {
	c := cli.Setup(oneShotCommand(cmd, ""))
	c.SetOut(out)
	return cli.Run(context.Background(), c, args)
}

// measureCommand runs "latencytier agent measure args..." printing to stdout.
func measureCommand(ctx context.Context, args []string, stdout io.Writer) error {
	c := cli.Setup(newMeasureCommand())
	c.SetOut(stdout)
	return cli.Run(ctx, c, args)
}
