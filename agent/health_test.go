package agent

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
)

// get GETs url and returns the status code and body; ok is false when
// nothing answered.
func get(url string) (code int, body string, ok bool) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), true
}

// While another process owns the journal, `latencytier agent` already
// serves its probes: /healthz succeeds (waiting for the journal is not
// wedged) and /readyz fails, naming the journal.
func TestProbesAnswerWhileTheJournalIsHeld(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/sys/kernel/osrelease": "6.6.8"})
	release, err := journal.Own(root, journal.ModeCLI)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, []string{"--node-name=node-wait", "--host-root=" + root.Dir(), "--kubeconfig=/nonexistent",
			"--health-probe-bind-address=" + addr})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, _, ok := get("http://" + addr + "/healthz"); ok {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("agent returned before serving its probes: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the probes never answered")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body, _ := get("http://" + addr + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while waiting for the journal = %d:\n%s", code, body)
	}
	code, body, _ := get("http://" + addr + "/readyz?verbose")
	if code != http.StatusInternalServerError || !strings.Contains(body, "[-]journal failed") {
		t.Errorf("/readyz while waiting for the journal = %d, want 500 naming the journal:\n%s", code, body)
	}
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "owned by") {
		t.Fatalf("agent stopped while waiting = %v, want the journal's owner named", err)
	}
}
