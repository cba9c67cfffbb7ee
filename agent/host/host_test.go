package host

import (
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
