package bootargs

import (
	"slices"
	"strings"

	"latencytier.io/latencytier/agent/host"
)

// Booted is what the running kernel holds, read after a boot.
type Booted struct {
	// BootID is /proc/sys/kernel/random/boot_id.
	BootID string
	// Present and Missing split the wanted arguments by whether
	// /proc/cmdline holds them exactly.
	Present, Missing []string
	// Isolated and NohzFull are what the kernel made of them
	// (/sys/devices/system/cpu/{isolated,nohz_full}; "" when absent or
	// empty).
	Isolated, NohzFull string
}

// Check reads the running kernel's command line and CPU isolation and
// compares them with want.
func Check(root *host.Root, want []Arg) Booted {
	var b Booted
	b.BootID, _ = root.ReadString(root.Proc("sys", "kernel", "random", "boot_id"))
	cmdline, _ := root.ReadString(root.Proc("cmdline"))
	have := bare(Parse(cmdline))
	for _, w := range bare(want) {
		if slices.Contains(have, w) {
			b.Present = append(b.Present, w.String())
		} else {
			b.Missing = append(b.Missing, w.String())
		}
	}
	b.Isolated, _ = root.ReadString(root.Sys("devices", "system", "cpu", "isolated"))
	b.NohzFull, _ = root.ReadString(root.Sys("devices", "system", "cpu", "nohz_full"))
	if strings.TrimSpace(b.NohzFull) == "(null)" {
		b.NohzFull = "" // the kernel prints (null) without nohz_full
	}
	return b
}
