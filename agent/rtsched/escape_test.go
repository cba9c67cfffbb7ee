package rtsched

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tenant names its thread "\x1b[31mevil\n" (prctl PR_SET_NAME, or
// /proc/self/comm): the name reaches knob labels and findings only escaped,
// so it can neither colour a terminal nor forge a line.
func TestReadStatEscapesTenantComm(t *testing.T) {
	fields := strings.Repeat(" 0", 44)
	p := filepath.Join(t.TempDir(), "stat")
	if err := os.WriteFile(p, []byte("4242 (\x1b[31mevil\n)"+fields+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := readStat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.comm != `\x1b[31mevil\x0a` {
		t.Fatalf("comm = %q, want the ESC and newline escaped", st.comm)
	}
}
