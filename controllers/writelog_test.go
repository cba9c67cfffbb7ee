package controllers

import (
	"testing"
	"time"
)

// The one record of the manager's own writes answers both questions: is
// the cache behind a write (by generation, until it catches up or the
// timeout), and is an event the echo of a write (by resourceVersion, until
// the next write or forget).
func TestWriteLog(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var l writeLog
	if l.behind("n", 0, false, t0, time.Second) || l.echo("n", "") || l.echo("n", "7") {
		t.Fatal("an empty log knows a write")
	}
	l.record("n", 3, "7", t0)
	steps := []struct {
		name                 string
		cached               int64
		present              bool
		at                   time.Duration
		wantBehind, wantEcho bool
	}{
		{"no object in the cache yet", 0, false, 0, true, true},
		{"an older generation cached", 2, true, 0, true, true},
		{"past the timeout", 2, true, 2 * time.Second, false, true},
	}
	for _, s := range steps {
		if got := l.behind("n", s.cached, s.present, t0.Add(s.at), time.Second); got != s.wantBehind {
			t.Errorf("%s: behind = %v", s.name, got)
		}
	}
	l.record("n", 4, "9", t0)
	if l.echo("n", "7") || !l.echo("n", "9") || l.echo("m", "9") {
		t.Error("echo does not follow the last write of that name")
	}
	if l.behind("n", 4, true, t0, time.Second) || l.behind("n", 0, false, t0, time.Second) {
		t.Error("a cache that showed the write is behind again")
	}
	l.record("p", 0, "11", t0) // a status write: no generation
	if l.behind("p", 0, false, t0, time.Second) || !l.echo("p", "11") {
		t.Error("a write without a generation: behind, or not its echo")
	}
	l.forget("p")
	if l.echo("p", "11") {
		t.Error("a forgotten write still echoes")
	}
}
