package cli

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func testTree(got *time.Duration, v *int) *cobra.Command {
	root := &cobra.Command{Use: "lt"}
	sub := &cobra.Command{Use: "measure", RunE: func(*cobra.Command, []string) error { return nil }}
	sub.Flags().DurationVar(got, "duration", time.Second, "")
	sub.Flags().IntVarP(v, "v", "v", 0, "")
	root.AddCommand(sub)
	return Setup(root)
}

// The commands parsed Go's flag syntax before cobra; scripts still pass it.
func TestGoStyleFlags(t *testing.T) {
	var d time.Duration
	var v int
	for _, args := range [][]string{
		{"measure", "-duration", "60s", "-v", "2"},
		{"measure", "-duration=60s", "-v=2"},
		{"measure", "--duration=60s", "--v=2"},
	} {
		d, v = 0, 0
		if err := Run(context.Background(), testTree(&d, &v), args); err != nil || d != time.Minute || v != 2 {
			t.Errorf("%q: duration %s, v %d, err %v; want 1m0s, 2", args, d, v, err)
		}
	}
	got := GoStyle(testTree(&d, &v), []string{"-duration", "-x", "-unknown=1", "--", "-duration"})
	if want := []string{"--duration", "-x", "-unknown=1", "--", "-duration"}; !slices.Equal(got, want) {
		t.Errorf("GoStyle = %q, want %q", got, want)
	}
	err := Run(context.Background(), testTree(&d, &v), []string{"measure", "-duration=soon"})
	if !IsUsage(err) || !strings.Contains(err.Error(), "--duration") {
		t.Errorf("bad value: %v; want a usage error naming --duration", err)
	}
}
