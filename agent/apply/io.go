package apply

import "latencytier.io/latencytier/agent/systemd"

// isProperty reports whether a knob or journal path names a systemd unit
// property rather than a file.
func isProperty(path string) bool { return systemd.IsPath(path) }

// read reads a knob's value: a kernel file, or a systemd unit property
// over D-Bus.
func (e *Engine) read(path string) (string, error) {
	if systemd.IsPath(path) {
		return systemd.Read(e.Root, path)
	}
	return e.Root.ReadString(path)
}

// writePath writes a knob's value where read reads it.
func (e *Engine) writePath(path, value string) error {
	if systemd.IsPath(path) {
		return systemd.Write(e.Root, path, value)
	}
	return e.Root.WriteString(path, value)
}
