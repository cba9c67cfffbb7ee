package bootargs

// SetSyncDirHook lets the external tests see every directory syncDir
// synced; the returned func removes the hook.
func SetSyncDirHook(f func(dir string)) func() {
	syncDirHook = f
	return func() { syncDirHook = nil }
}
