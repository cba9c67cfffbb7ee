// Package tiertest holds what the tier scheduler's tests on a real kernel
// share (agent/tiersched, agent/loop): never imported by production code.
package tiertest

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
)

// mapNames are the tier scheduler's maps as the kernel names them
// (agent/tiersched/bpf's tier.bpf.c): its struct_ops and granted sets.
var mapNames = []string{"tier_ops", "granted_cgroups", "granted_tgids"}

// LoadedMaps counts the kernel's BPF maps named like the tier scheduler's:
// 0 while nothing of it is loaded.
func LoadedMaps(t testing.TB) int {
	t.Helper()
	n := 0
	for id := ebpf.MapID(0); ; {
		next, err := ebpf.MapGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return n
		}
		if err != nil {
			t.Fatalf("list BPF maps: %v", err)
		}
		id = next
		m, err := ebpf.NewMapFromID(id)
		if err != nil {
			continue // gone meanwhile
		}
		if info, err := m.Info(); err == nil && slices.Contains(mapNames, info.Name) {
			n++
		}
		m.Close()
	}
}
