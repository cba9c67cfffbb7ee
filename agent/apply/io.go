package apply

import (
	"path/filepath"
	"strings"

	"latencytier.io/latencytier/agent/access"
	"latencytier.io/latencytier/agent/knob"
)

// env is what the knobs' Accesses reach the host through.
func (e *Engine) env() knob.Env {
	run := e.HostTool
	if run == nil {
		run = access.HostTool(e.Root)
	}
	return knob.Env{Root: e.Root, Run: run}
}

// rel is how the journal records a knob's address: a file relative to the
// host root, so an agent in the DaemonSet (root /host) and the CLI on the
// node (root /) read each other's journal; other addresses as they are.
func (e *Engine) rel(acc *knob.Access, path string) string {
	if !acc.InRoot {
		return path
	}
	r, err := filepath.Rel(e.Root.Dir(), path)
	if err != nil || strings.HasPrefix(r, "..") {
		return path
	}
	return r
}

// abs resolves a journaled address: a file is joined to the host root when
// relative, kept when absolute and under it (older journals), re-rooted
// otherwise, so an edited journal cannot point a restore outside the root;
// other addresses are names and are kept.
func (e *Engine) abs(acc *knob.Access, path string) string {
	if !acc.InRoot {
		return path
	}
	return e.Root.Confine(path)
}
