package journal

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
)

// Two Roots on one state directory stand for the DaemonSet agent (root
// /host) and the node CLI (root /): while one owns the journal the other is
// refused with a message naming the owner; once the owner is gone (release,
// or the process dies and the kernel drops its flock) the other gets it.
func TestOwnerRefusesASecondOwner(t *testing.T) {
	agentRoot := testroot.New(t, nil)
	cliRoot := host.New(agentRoot.Dir())
	release, err := Own(agentRoot, ModeAgent)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Own(cliRoot, ModeCLI)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second Own = %v, want HeldError", err)
	}
	host, _ := os.Hostname()
	if held.Owner.Mode != ModeAgent || held.Owner.PID != os.Getpid() || held.Owner.Name != host ||
		time.Since(held.Owner.Since) > time.Minute {
		t.Fatalf("owner = %+v", held.Owner)
	}
	for _, want := range []string{"DaemonSet agent", "pid ", agentRoot.StateDir()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	release()
	again, err := Own(cliRoot, ModeCLI)
	if err != nil {
		t.Fatalf("Own after release: %v", err)
	}
	_, err = Own(agentRoot, ModeAgent)
	if !errors.As(err, &held) || held.Owner.Mode != ModeCLI {
		t.Fatalf("Own while the CLI owns = %v", err)
	}
	again()
}

func TestOwnWaitGetsTheJournalWhenTheOwnerLeaves(t *testing.T) {
	root := testroot.New(t, nil)
	release, err := Own(root, ModeCLI)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan *HeldError, 1)
	go func() { time.Sleep(200 * time.Millisecond); release() }()
	got, err := OwnWait(context.Background(), root, ModeAgent, 20*time.Millisecond, func(h *HeldError) { waited <- h })
	if err != nil {
		t.Fatal(err)
	}
	defer got()
	if h := <-waited; h.Owner.Mode != ModeCLI {
		t.Fatalf("waited for %+v", h.Owner)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := OwnWait(ctx, host.New(root.Dir()), ModeCLI, 10*time.Millisecond, func(*HeldError) {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OwnWait past its context = %v", err)
	}
}
