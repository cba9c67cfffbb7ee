// Package agent is the latencytier node agent.
package agent

import (
	"context"
	"errors"
)

// Main runs "latencytier agent [plan] ...". Placeholder until the agent issue lands.
func Main(ctx context.Context, args []string) error {
	return errors.New("agent is not implemented yet")
}
