package apply

import (
	"latencytier.io/latencytier/agent/rtsched"
	"latencytier.io/latencytier/agent/systemd"
)

// isProperty reports whether a knob or journal path names a systemd unit
// property or a thread's scheduling policy rather than a file.
func isProperty(path string) bool { return systemd.IsPath(path) || rtsched.IsPath(path) }

// read reads a knob's value: a kernel file, a systemd unit property over
// D-Bus, or a thread's scheduling policy (sched_getattr).
func (e *Engine) read(path string) (string, error) {
	switch {
	case systemd.IsPath(path):
		return systemd.Read(e.Root, path)
	case rtsched.IsPath(path):
		return rtsched.Read(e.Root, path)
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
	}
	return e.Root.WriteString(path, value)
}
