// Package testroot builds temp-dir host roots for tests and snapshots the
// real kernel state the agent touches, so tests can prove they left it as
// they found it.
package testroot

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/internal/privtest"
)

// New is a temp-dir root holding files (relative path → content) plus a
// boot id.
func New(t testing.TB, files map[string]string) *host.Root {
	t.Helper()
	all := map[string]string{"proc/sys/kernel/random/boot_id": "11111111-2222-3333-4444-555555555555\n"}
	for k, v := range files {
		all[k] = v
	}
	return Files(t, all)
}

// Files is a temp-dir root holding exactly files (relative path → content;
// content "/" makes an empty directory), with no boot id.
func Files(t testing.TB, files map[string]string) *host.Root {
	t.Helper()
	dir := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if content == "/" {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		Write(t, p, content)
	}
	return host.New(dir)
}

// Lines is Files with a newline after every file's content, as kernel files
// read.
func Lines(t testing.TB, files map[string]string) *host.Root {
	t.Helper()
	lines := make(map[string]string, len(files))
	for rel, content := range files {
		if content != "/" {
			content += "\n"
		}
		lines[rel] = content
	}
	return Files(t, lines)
}

// Write creates path (and its parents) with content.
func Write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Read returns a file's trimmed content, failing the test on error.
func Read(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// Snapshot reads every readable regular file under /proc/sys/kernel (top
// level, not random/ which changes by itself) and every
// /proc/irq/*/smp_affinity_list plus default_smp_affinity.
func Snapshot(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(pattern string) {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			st, err := os.Stat(p)
			if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o444 == 0 {
				continue
			}
			if b, err := os.ReadFile(p); err == nil {
				out[p] = string(b)
			}
		}
	}
	add("/proc/sys/kernel/*")
	add("/proc/irq/*/smp_affinity_list")
	add("/proc/irq/default_smp_affinity")
	for _, volatile := range []string{"/proc/sys/kernel/ns_last_pid", "/proc/sys/kernel/tainted"} {
		delete(out, volatile)
	}
	return out
}

// Diff lists the paths whose values differ between two snapshots.
func Diff(before, after map[string]string) []string {
	var out []string
	for p, v := range before {
		if after[p] != v {
			out = append(out, p+": "+strings.TrimSpace(v)+" -> "+strings.TrimSpace(after[p]))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			out = append(out, p+": new")
		}
	}
	sort.Strings(out)
	return out
}

// RealKernel is a temp-dir root whose proc and sys are symlinks to the real
// /proc and /sys: knobs reach the real kernel while the journal
// (var/lib/latencytier) stays private to the test.
func RealKernel(t testing.TB) *host.Root {
	t.Helper()
	privtest.Root(t)
	dir := t.TempDir()
	for _, d := range []string{"proc", "sys"} {
		if err := os.Symlink("/"+d, filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	return host.New(dir)
}

// Restore registers a cleanup that writes path's current value back.
func Restore(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s for restore: %v", path, err)
	}
	orig := strings.TrimSpace(string(b))
	t.Cleanup(func() {
		cur, _ := os.ReadFile(path)
		if strings.TrimSpace(string(cur)) == orig {
			return
		}
		if err := os.WriteFile(path, []byte(orig), 0); err != nil {
			t.Errorf("restore %s to %q: %v", path, orig, err)
		}
	})
}

// Mounts lists the mount points of every fstype mount this process sees
// (/proc/self/mountinfo), once per mount: stacked mounts repeat.
func Mounts(t testing.TB, fstype string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if _, post, ok := strings.Cut(line, " - "); ok && len(f) > 4 && strings.HasPrefix(post, fstype+" ") {
			out = append(out, f[4])
		}
	}
	return out
}
