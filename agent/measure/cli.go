// Package measure measures run-queue latency, throttling and PSI on the node.
package measure

import (
	"context"
	"errors"
	"io"
)

// Command runs "latencytier agent measure". Placeholder until the measurement issue lands.
func Command(ctx context.Context, args []string, stdout io.Writer) error {
	return errors.New("measure is not implemented yet")
}
