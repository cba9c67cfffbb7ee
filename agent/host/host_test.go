package host

import (
	"os"
	"path/filepath"
	"testing"
)

// Every path a Root hands out stays under its directory, whatever ".." the
// elements carry: a journal entry or a name from the API must not address a
// file outside the host root.
func TestPathStaysUnderRoot(t *testing.T) {
	dir := t.TempDir()
	r := New(dir)
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"climbing element", r.Path("a/../../.."), dir},
		{"climbing elements", r.Path("..", "..", "etc", "shadow"), filepath.Join(dir, "etc", "shadow")},
		{"absolute element", r.Path("/etc/shadow"), filepath.Join(dir, "etc", "shadow")},
		{"climb out of proc", r.Proc("..", "..", "..", "etc"), filepath.Join(dir, "etc")},
		{"climb out of cgroup", r.Cgroup("../../../../var"), filepath.Join(dir, "var")},
		{"climb out of kubelet", r.KubeletDir("..", "..", "..", "..", "x"), filepath.Join(dir, "x")},
		{"inner dot-dot", r.Sys("kernel", "..", "fs"), filepath.Join(dir, "sys", "fs")},
		{"no elements", r.Path(), dir},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, tc.got, tc.want)
		}
	}
	if got := New("/").Path("..", "etc"); got != "/etc" {
		t.Errorf("real root: %s, want /etc", got)
	}
}

// Confine takes a path recorded earlier (a journal entry, relative to the
// root or absolute) back under the root.
func TestConfine(t *testing.T) {
	dir := t.TempDir()
	r := New(dir)
	cases := map[string]string{
		"proc/sys/kernel/x":                 filepath.Join(dir, "proc/sys/kernel/x"),
		filepath.Join(dir, "proc/irq/1/a"):  filepath.Join(dir, "proc/irq/1/a"),
		"/proc/sys/kernel/x":                filepath.Join(dir, "proc/sys/kernel/x"),
		"../../../etc/shadow":               filepath.Join(dir, "etc/shadow"),
		filepath.Join(dir, "../etc/shadow"): filepath.Join(dir, filepath.Dir(dir), "etc/shadow"),
		dir + "x/etc":                       filepath.Join(dir, dir+"x/etc"),
	}
	for in, want := range cases {
		if got := r.Confine(in); got != want {
			t.Errorf("Confine(%q) = %s, want %s", in, got, want)
		}
	}
	if got := New("/").Confine("/host/proc/sys/a"); got != "/host/proc/sys/a" {
		t.Errorf("real root: Confine = %s", got)
	}
}

// WriteOwn replaces the file whole, 0600, and a symlink planted at its name
// (or at its temp name) is replaced, never followed.
func TestWriteOwnReplacesAndNeverFollows(t *testing.T) {
	r := New(t.TempDir())
	if err := r.WriteOwn("rec.json", []byte("first, longer")); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteOwn("rec.json", []byte("second")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(r.StateDir(), "rec.json")
	if b, err := os.ReadFile(path); err != nil || string(b) != "second" {
		t.Fatalf("content %q, %v", b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{path, path + ".tmp"} {
		_ = os.Remove(link)
		if err := os.Symlink(victim, link); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteOwn("rec.json", []byte("third")); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(victim); string(b) != "untouched" {
			t.Fatalf("wrote through the symlink at %s: victim now %q", link, b)
		}
		if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s is not a regular file after the write: %v %v", path, fi.Mode(), err)
		}
	}
	if _, err := os.Lstat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temp file left: %v", err)
	}
}
