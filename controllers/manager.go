// Package controllers holds the latencytier manager: one Reconciler per kind.
package controllers

import (
	"context"
	"errors"
)

// RunManager parses the manager's flags and runs it until ctx ends.
// Placeholder until the controller issue lands.
func RunManager(ctx context.Context, args []string) error {
	return errors.New("manager is not implemented yet")
}
