//go:build privileged

package journal

import (
	"os"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/internal/privtest"
)

// As root: a state directory owned by another user (here nobody) is refused
// even with mode 0700, since its owner could plant links or a forged
// journal in it.
func TestStateDirRefusedWhenNotRootOwned(t *testing.T) {
	privtest.Root(t)
	root := testroot.New(t, nil)
	dir := root.StateDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	release, err := Own(root, ModeAgent)
	if err == nil {
		release()
		t.Fatal("Own accepted a state directory owned by uid 65534")
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "65534") {
		t.Errorf("error %q does not name %s and its owner", err, dir)
	}
	if _, err := Load(root); err == nil {
		t.Error("Load accepted the state directory")
	}
}
