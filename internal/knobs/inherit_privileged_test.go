//go:build privileged

package knobs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"latencytier.io/latencytier/internal/kernellock"
)

// procPath is the /proc/sys file of a dotted name.
func procPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

// inNewNetns reads a /proc/sys file from a network namespace created now.
func inNewNetns(t *testing.T, path string) (string, bool) {
	t.Helper()
	out, err := exec.Command("unshare", "--net", "cat", path).Output()
	return strings.TrimSpace(string(out)), err == nil
}

// Real kernel: what the catalogue says about network namespaces holds. The
// built-in allowlist's net.core sysctls exist in the initial network
// namespace only (nothing for a pod's namespace to inherit), and a value
// set under an Inherited entry is what a network namespace created
// meanwhile starts with (so a pod created under the profile keeps it after
// the revert: the reason those need the admin's unlock).
func TestNetworkNamespaceFactsOnTheRealKernel(t *testing.T) {
	kernellock.Lock(t)
	for _, r := range rules {
		if r.Namespace != nsInitNet {
			continue
		}
		if _, err := os.Stat(procPath(r.Name)); err != nil {
			continue // not on this kernel
		}
		if v, ok := inNewNetns(t, procPath(r.Name)); ok {
			t.Errorf("%s is listed as initial-namespace-only but a new network namespace has it (%q)", r.Name, v)
		}
	}
	// One leaf per Inherited entry this kernel has (IPv6 depends on
	// devconf_inherit_init_net and is not probed here).
	for name, leaf := range map[string]string{
		"net.ipv4.conf.all.":     "net.ipv4.conf.all.arp_ignore",
		"net.ipv4.conf.default.": "net.ipv4.conf.default.arp_announce",
		"net.ipv4.tcp_rmem":      "net.ipv4.tcp_rmem",
		"net.ipv4.tcp_wmem":      "net.ipv4.tcp_wmem",
	} {
		if r, ok := lookup(leaf); !ok || r.Name != name || !r.Inherited {
			t.Errorf("%s: catalogue entry %+v, want %s Inherited", leaf, r, name)
			continue
		}
		path := procPath(leaf)
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(path, before, 0o644); err != nil {
				t.Errorf("restore %s: %v", leaf, err)
			}
		})
		probe := "2"
		if strings.Contains(leaf, "mem") {
			probe = "4096 99999 4194304"
		}
		if err := os.WriteFile(path, []byte(probe), 0o644); err != nil {
			t.Fatal(err)
		}
		got, ok := inNewNetns(t, path)
		if !ok || strings.Join(strings.Fields(got), " ") != probe {
			t.Errorf("%s: a new network namespace starts with %q, not the %q set meanwhile", leaf, got, probe)
		}
		if err := os.WriteFile(path, before, 0o644); err != nil {
			t.Errorf("restore %s: %v", leaf, err)
		}
	}
}
