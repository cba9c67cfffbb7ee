package sysctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"latencytier.io/latencytier/agent/host"
)

// debugfsMagic is debugfs's f_type in statfs(2) (DEBUGFS_MAGIC).
const debugfsMagic = 0x64626720

// debugfsMarker is the file in the state directory that records a debugfs
// mount the agent made: the boot and the mount namespace it was made in. A
// restarted agent (or `agent revert` after `agent apply`) knows from it
// that the mount is its own to remove; a mount of an earlier boot, or of a
// pod's mount namespace that died with the pod, is gone already.
const debugfsMarker = "debugfs.mount"

// isDebugfs reports whether dir is (the root of, or inside) a debugfs mount.
func isDebugfs(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == debugfsMagic
}

// mountOwner identifies where a mount made now lives: this boot and this
// process's mount namespace.
func mountOwner(root *host.Root) string {
	boot, _ := root.ReadString(root.Proc("sys", "kernel", "random", "boot_id"))
	ns, _ := os.Readlink(root.Proc("self", "ns", "mnt"))
	return fmt.Sprintf("boot=%s\nmntns=%s\n", boot, ns)
}

// recordDebugfsMount notes that the agent mounted debugfs.
func recordDebugfsMount(root *host.Root) error {
	if err := os.MkdirAll(root.StateDir(), 0o700); err != nil {
		return err
	}
	return root.WriteFile(filepath.Join(root.StateDir(), debugfsMarker), []byte(mountOwner(root)), 0o600)
}

// ReleaseDebugfs unmounts debugfs if the agent mounted it (this boot, in
// this mount namespace) and it is still mounted, and forgets the mount. It
// is called once nothing is left to revert; a debugfs someone else mounted
// is never touched. unmounted says it unmounted one.
func ReleaseDebugfs(root *host.Root) (unmounted bool, err error) {
	marker := filepath.Join(root.StateDir(), debugfsMarker)
	b, err := root.ReadFile(marker)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", marker, err)
	}
	dir := root.Sys("kernel", "debug")
	if string(b) == mountOwner(root) && isDebugfs(dir) {
		if err := syscall.Unmount(dir, 0); err != nil {
			return false, fmt.Errorf("unmount the debugfs the agent mounted at %s: %w", dir, err)
		}
		unmounted = true
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return unmounted, fmt.Errorf("remove %s: %w", marker, err)
	}
	return unmounted, nil
}
