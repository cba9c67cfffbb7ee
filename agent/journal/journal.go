// Package journal keeps the original value of every kernel setting the agent
// changes, in /var/lib/latencytier/journal.json under the host root, so a
// crash, a restart, a spec change or a deleted profile restores exactly what
// was there. It is written atomically (temp file, fsync, rename, fsync of the
// directory) before any kernel write. It records the boot it belongs to: after
// a reboot the kernel is back at its boot values and stale originals must not
// be written back. A journal that does not parse is never guessed at: it is
// moved aside (Quarantine) for a human, and the fresh journal that replaces
// it is marked recovered (see Journal.RecoveredFrom). Each entry records
// the kind of its value (Entry.Kind), so it is restored without its knob.
// One lock guards the journal: the flock on owner.lock (Own, Lock).
package journal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"latencytier.io/latencytier/agent/host"
)

// Version is the journal format version.
const Version = 1

// FileName is the journal's file name inside the host's state directory.
const FileName = "journal.json"

// ErrCorrupt marks a journal that exists but cannot be trusted.
var ErrCorrupt = errors.New("journal is corrupt")

// Entry is one setting the agent changed.
type Entry struct {
	// ID is the knob's setting name.
	ID string `json:"id"`
	// Kind names the knob.Access that reaches Path ("file", "systemd",
	// "thread", "bootargs", "cpuset"; agent/access). Entries written before kinds
	// were recorded have none: their kind is the one their Path claims.
	// Adding it kept Version at 1: an older agent ignores the field and
	// still tells the kinds apart by Path, so a rollback keeps the journal.
	Kind string `json:"kind,omitempty"`
	// Path is the knob's address: a file relative to the host root for
	// kind "file", the Access's own name for the value otherwise
	// ("sched:<tid>@<start>", "systemd:<unit>/AllowedCPUs", ...).
	Path string `json:"path"`
	// Original is the value that restores the setting as it was before
	// the agent's first write this boot (in the file's write format).
	Original string `json:"original"`
	// OriginalRead is the value as read before the first write, when its
	// read format differs from Original (cgroup.subtree_control).
	OriginalRead string `json:"originalRead,omitempty"`
	// Written lists every value the agent wrote or was about to write,
	// oldest first. Revert restores Original only where the kernel still
	// holds one of these; anything else is someone else's value.
	Written []string `json:"written,omitempty"`
	// ReadBack lists what the kernel showed after the agent's writes; for
	// files whose read format differs from the written value these, not
	// Written, are what the kernel holds while the agent's value stands.
	ReadBack []string `json:"readBack,omitempty"`
	// Verified is the last value the agent wrote and read back; a later
	// read that differs is drift.
	Verified string `json:"verified,omitempty"`
	// Refused is a value the kernel refused as immovable this boot, and
	// RefusedMessage why; the agent does not retry it every pass.
	Refused        string `json:"refused,omitempty"`
	RefusedMessage string `json:"refusedMessage,omitempty"`
	// RestoreFailures counts the passes whose restore of this entry failed
	// (read or write error other than "gone"); the engine gives up after a
	// bound so a revert can complete.
	RestoreFailures int `json:"restoreFailures,omitempty"`
	// OriginalUnknown marks a setting found at its desired value after a
	// corrupt journal was moved aside: that value may be the agent's own
	// from before, so it is not an original, and revert leaves it.
	OriginalUnknown bool `json:"originalUnknown,omitempty"`
}

// Read is the value as read before the first write.
func (e *Entry) Read() string {
	if e.OriginalRead != "" {
		return e.OriginalRead
	}
	return e.Original
}

// NoteReadBack records what the kernel showed after a write of ours.
func (e *Entry) NoteReadBack(v string) {
	if !slices.Contains(e.ReadBack, v) {
		e.ReadBack = append(e.ReadBack, v)
	}
}

// Ours reports whether value is one the agent wrote (or the kernel showed
// after one of its writes).
func (e *Entry) Ours(value string, equal func(a, b string) bool) bool {
	for _, w := range append(slices.Clone(e.Written), e.ReadBack...) {
		if equal(value, w) {
			return true
		}
	}
	return false
}

// Journal is the whole file.
type Journal struct {
	Version int `json:"version"`
	// BootID is /proc/sys/kernel/random/boot_id when the journal was written.
	BootID string `json:"bootID"`
	// Profile and ProfileGeneration are the spec the entries belong to.
	Profile           string `json:"profile,omitempty"`
	ProfileGeneration int64  `json:"profileGeneration,omitempty"`
	// RecoveredFrom names the corrupt journal (moved aside, relative to the
	// state directory) this one replaced during this boot. While it is set
	// the kernel may still hold values the agent wrote before: a setting
	// already at its desired value is journaled with OriginalUnknown. It
	// ends with the boot (a reboot restores boot values) or when an admin
	// removes the journal.
	RecoveredFrom string `json:"recoveredFrom,omitempty"`
	// Entries are in the order the agent applied them; revert walks them
	// backwards.
	Entries   []Entry   `json:"entries"`
	UpdatedAt time.Time `json:"updatedAt"`

	// index maps an entry's ID to its position in Entries, so Find, Record
	// and Drop are O(1) and a pass over n knobs is O(n), not O(n²). It is
	// rebuilt whenever it no longer describes Entries (callers append to
	// Entries directly, and a loaded journal has none).
	index map[string]int
}

// New is an empty journal for this boot.
func New(bootID string) *Journal {
	return &Journal{Version: Version, BootID: bootID}
}

// Find returns the entry for id, or nil.
func (j *Journal) Find(id string) *Entry {
	if i, ok := j.lookup(id); ok {
		return &j.Entries[i]
	}
	return nil
}

// lookup is id's position in Entries.
func (j *Journal) lookup(id string) (int, bool) {
	if j.index == nil || len(j.index) != len(j.Entries) {
		j.reindex()
	}
	i, ok := j.index[id]
	if ok && j.Entries[i].ID != id {
		// Entries was edited in place behind the index.
		j.reindex()
		i, ok = j.index[id]
	}
	return i, ok
}

func (j *Journal) reindex() {
	j.index = make(map[string]int, len(j.Entries))
	for i := range j.Entries {
		j.index[j.Entries[i].ID] = i
	}
}

// Record notes that the agent is about to write value to id. original is
// the value that restores the setting, read is how it was read (the same for
// most files). The first record of an id keeps its original; later records
// keep the first. It returns the entry.
func (j *Journal) Record(id, path, original, read, value string) *Entry {
	e := j.Find(id)
	if e == nil {
		e = j.Add(Entry{ID: id, Path: path, Original: original})
		if read != original {
			e.OriginalRead = read
		}
	}
	if !slices.Contains(e.Written, value) {
		e.Written = append(e.Written, value)
	}
	return e
}

// Add appends a new entry (its ID not yet journaled) and indexes it, so a
// pass adding n entries stays O(n); appending to Entries directly would
// make the next lookup rebuild the index.
func (j *Journal) Add(en Entry) *Entry {
	if _, ok := j.lookup(en.ID); !ok {
		j.index[en.ID] = len(j.Entries)
	}
	j.Entries = append(j.Entries, en)
	return &j.Entries[len(j.Entries)-1]
}

// Drop removes the entry for id. Only the entries after it move, so
// dropping newest first (the order revert walks) costs O(1) each.
func (j *Journal) Drop(id string) {
	i, ok := j.lookup(id)
	if !ok {
		return
	}
	j.Entries = slices.Delete(j.Entries, i, i+1)
	delete(j.index, id)
	for k := i; k < len(j.Entries); k++ {
		j.index[j.Entries[k].ID] = k
	}
}

// Path is the journal file under root.
func Path(root *host.Root) string { return filepath.Join(root.StateDir(), FileName) }

// BootID reads the kernel's boot id.
func BootID(root *host.Root) (string, error) {
	id, err := root.ReadString(root.Proc("sys", "kernel", "random", "boot_id"))
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return id, nil
}

// Load reads the journal. It returns (nil, nil) when there is none and an
// error wrapping ErrCorrupt when the file exists but does not parse.
func Load(root *host.Root) (*Journal, error) {
	if _, exists, err := root.CheckStateDir(); err != nil || !exists {
		return nil, err
	}
	b, err := root.ReadOwn(Path(root))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	var j Journal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, Path(root), err)
	}
	if err := j.check(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, Path(root), err)
	}
	return &j, nil
}

func (j *Journal) check() error {
	if j.Version != Version {
		return fmt.Errorf("version %d, want %d", j.Version, Version)
	}
	if j.BootID == "" {
		return errors.New("no boot id")
	}
	seen := map[string]bool{}
	for _, e := range j.Entries {
		if e.ID == "" || e.Path == "" {
			return errors.New("entry without id or path")
		}
		if seen[e.ID] {
			return fmt.Errorf("duplicate entry %s", e.ID)
		}
		seen[e.ID] = true
	}
	return nil
}

// Save writes the journal atomically: a temp file in the same directory
// (created O_EXCL|O_NOFOLLOW, so nothing planted there is written through),
// fsync, rename over the journal (which replaces a link, never follows it),
// fsync of the directory.
func Save(root *host.Root, j *Journal) error {
	j.Version = Version
	j.UpdatedAt = time.Now().UTC().Truncate(time.Second)
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("encode journal: %w", err)
	}
	dir, err := root.OwnStateDir()
	if err != nil {
		return err
	}
	clearTemps(dir)
	tmpName := filepath.Join(dir, fmt.Sprintf("%s.tmp-%d-%d", FileName, os.Getpid(), time.Now().UnixNano()))
	tmp, err := root.OpenOwn(tmpName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create temp journal: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write temp journal: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("fsync temp journal: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close temp journal: %w", err)
	}
	if err := os.Rename(tmp.Name(), Path(root)); err != nil {
		return fmt.Errorf("rename journal: %w", err)
	}
	return syncDir(dir)
}

// Remove deletes the journal after a complete revert.
func Remove(root *host.Root) error {
	clearTemps(root.StateDir())
	err := os.Remove(Path(root))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove journal: %w", err)
	}
	return syncDir(root.StateDir())
}

// clearTemps removes temp journals an earlier Save left when it crashed
// between creating and renaming them. Save and Remove run under the
// journal's one lock (Lock), so no other Save is writing one.
func clearTemps(dir string) {
	left, _ := filepath.Glob(filepath.Join(dir, FileName+".tmp-*"))
	for _, p := range left {
		_ = os.Remove(p)
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
