package apply

import (
	"context"
	"path/filepath"
	"strings"

	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/rtsched"
	"latencytier.io/latencytier/agent/systemd"
)

// isProperty reports whether a knob or journal path names a systemd unit
// property or a thread's scheduling policy rather than a file.
func isProperty(path string) bool {
	return systemd.IsPath(path) || rtsched.IsPath(path) || bootargs.IsPath(path)
}

// read reads a knob's value: a kernel file, a systemd unit property over
// D-Bus, or a thread's scheduling policy (sched_getattr).
func (e *Engine) read(path string) (string, error) {
	switch {
	case systemd.IsPath(path):
		return systemd.Read(e.Root, path)
	case rtsched.IsPath(path):
		return rtsched.Read(e.Root, path)
	case bootargs.IsPath(path):
		return bootargs.Read(e.Root, path)
	}
	return e.Root.ReadString(path)
}

// writePath writes a knob's value where read reads it.
func (e *Engine) writePath(path, value string) error {
	switch {
	case systemd.IsPath(path):
		return systemd.Write(e.Root, path, value)
	case rtsched.IsPath(path):
		return rtsched.Write(e.Root, path, value)
	case bootargs.IsPath(path):
		return bootargs.Write(context.Background(), e.Root, path, value, e.hostTool())
	}
	return e.Root.WriteString(path, value)
}

// rel is how the journal records a path: relative to the host root, so an
// agent in the DaemonSet (root /host) and the CLI on the node (root /) read
// each other's journal.
func (e *Engine) rel(path string) string {
	r, err := filepath.Rel(e.Root.Dir(), path)
	if err != nil || strings.HasPrefix(r, "..") {
		return path
	}
	return r
}

// abs resolves a journaled path under the host root: relative paths are
// joined to it, absolute ones (older journals) are kept when they lie under
// it and re-rooted otherwise, so an edited journal cannot point a restore
// outside the root. systemd unit properties are not paths and are kept.
func (e *Engine) abs(path string) string {
	if isProperty(path) {
		return path
	}
	return e.Root.Confine(path)
}
