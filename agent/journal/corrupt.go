package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/procfs"

	"latencytier.io/latencytier/agent/host"
)

// CorruptPrefix starts the name of a corrupt journal moved aside; the rest
// is the UTC time it was moved.
const CorruptPrefix = FileName + ".corrupt-"

// Quarantine moves a corrupt journal aside to journal.json.corrupt-<time>
// in the state directory, where it stays for a human to read: the agent
// never deletes it. earlierBoot says the file was last written before this
// boot began, so the reboot already restored the boot values it recorded.
// The caller holds the journal's lock (Lock).
func Quarantine(root *host.Root, now time.Time) (aside string, earlierBoot bool, err error) {
	st, err := os.Lstat(Path(root))
	if err != nil {
		return "", false, fmt.Errorf("move corrupt journal aside: %w", err)
	}
	if boot, ok := bootTime(root); ok && st.ModTime().Before(boot) {
		earlierBoot = true
	}
	stamp := now.UTC().Format("20060102T150405Z")
	aside = filepath.Join(root.StateDir(), CorruptPrefix+stamp)
	for n := 1; ; n++ {
		if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		aside = filepath.Join(root.StateDir(), fmt.Sprintf("%s%s-%d", CorruptPrefix, stamp, n))
	}
	if err := os.Rename(Path(root), aside); err != nil {
		return "", false, fmt.Errorf("move corrupt journal aside: %w", err)
	}
	return aside, earlierBoot, syncDir(root.StateDir())
}

// bootTime is when this boot began (btime in the host's /proc/stat).
func bootTime(root *host.Root) (time.Time, bool) {
	pfs, err := procfs.NewFS(root.Proc())
	if err != nil {
		return time.Time{}, false
	}
	st, err := pfs.Stat()
	if err != nil || st.BootTime == 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(st.BootTime), 0), true
}
