package bootargs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
)

// RunFunc runs a host tool (absolute argv[0]) as the transient unit named
// unit and waits for it: systemd.Run in the agent.
type RunFunc = knob.RunFunc

// updateGRUB is Debian's wrapper around grub-mkconfig, on the host.
var updateGRUB = []string{"/usr/sbin/update-grub"}

const updateUnit = "latencytier-update-grub.service"

// GRUB stages and reverts arguments through a Debian-style GRUB: the
// agent's own drop-in in /etc/default/grub.d, then update-grub on the host.
// The drop-in is a file the agent owns whole: its original state is
// absent, which its header proves (a file of that name without the header
// is someone else's, and is refused, never overwritten or removed).
type GRUB struct {
	Root *host.Root
	Run  RunFunc
}

// Staged returns the arguments the drop-in holds (nil when there is none).
func (g GRUB) Staged() ([]Arg, error) {
	b, err := g.Root.ReadFile(g.Root.Path(DropIn))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseGRUB(string(b))
}

// Stage writes the drop-in for args and regenerates the bootloader
// configuration; changed says whether anything was written (false when the
// drop-in already held exactly this). Arguments another GRUB file sets
// differently are refused with the conflicts, before any write.
func (g GRUB) Stage(ctx context.Context, args []Arg, profile string) (changed bool, err error) {
	text, err := RenderGRUB(args, profile)
	if err != nil {
		return false, err
	}
	path := g.Root.Path(DropIn)
	cur, err := g.Root.ReadFile(path)
	switch {
	case err == nil && string(cur) == text:
		return false, nil
	case err == nil:
		if _, perr := ParseGRUB(string(cur)); perr != nil {
			return false, fmt.Errorf("%s exists and is not the agent's (%v): refusing to overwrite it", "/"+DropIn, perr)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	staged, _ := g.Staged()
	srcs, err := GRUBSources(g.Root)
	if err != nil {
		return false, err
	}
	if cs := Conflicts(args, staged, srcs...); len(cs) > 0 {
		return false, &ConflictError{Conflicts: cs}
	}
	if err := writeAtomic(path, text); err != nil {
		return false, err
	}
	return true, g.Run(ctx, updateUnit, updateGRUB)
}

// Revert removes the drop-in and regenerates the configuration, which is
// then what the distribution's own files make of it (byte for byte what it
// was before Stage, unless someone changed those files since).
func (g GRUB) Revert(ctx context.Context) (changed bool, err error) {
	path := g.Root.Path(DropIn)
	cur, err := g.Root.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := ParseGRUB(string(cur)); err != nil {
		return false, fmt.Errorf("%s is no longer the agent's (%v): leaving it", "/"+DropIn, err)
	}
	if err := removeSynced(path); err != nil {
		return false, err
	}
	return true, g.Run(ctx, updateUnit, updateGRUB)
}

// ConflictError lists arguments already set to other values elsewhere.
type ConflictError struct{ Conflicts []Conflict }

func (e *ConflictError) Error() string {
	s := "kernel arguments already set differently, not overwritten:"
	for _, c := range e.Conflicts {
		s += " " + c.String() + ";"
	}
	return s[:len(s)-1]
}

// writeAtomic writes path through a temp file in its directory, synced and
// renamed, so update-grub never sources half a drop-in.
func writeAtomic(path, text string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".latencytier-*.tmp")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDirHook, when set (tests), is told of every directory syncDir synced.
var syncDirHook func(dir string)

// syncDir fsyncs a directory after a file in it was created, renamed or
// removed: the file's own fsync does not make its name durable, and a crash
// or reboot right after could bring back the old name (the old
// /etc/kernel/cmdline, a kept copy the revert had removed).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	if syncDirHook != nil {
		syncDirHook(dir)
	}
	return nil
}

// removeSynced removes path and syncs its directory; a path already gone
// is no error.
func removeSynced(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(path))
}
