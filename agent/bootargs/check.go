package bootargs

import (
	"slices"
	"strconv"
	"strings"
	"time"

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
	// BootedAt is when the running kernel booted (btime in /proc/stat);
	// zero when unreadable.
	BootedAt time.Time
}

// Check reads the running kernel's command line and CPU isolation and
// compares them with want.
func Check(root *host.Root, want []Arg) Booted {
	cmdline, _ := root.ReadString(root.Proc("cmdline"))
	return CheckCmdline(root, cmdline, want)
}

// CheckCmdline is Check with the command line a pass already read.
func CheckCmdline(root *host.Root, cmdline string, want []Arg) Booted {
	var b Booted
	b.BootID, _ = root.ReadString(root.Proc("sys", "kernel", "random", "boot_id"))
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
	b.BootedAt = bootTime(root)
	return b
}

// bootTime reads btime (seconds since the epoch) from /proc/stat.
func bootTime(root *host.Root) time.Time {
	stat, err := root.ReadFile(root.Proc("stat"))
	if err != nil {
		return time.Time{}
	}
	for _, l := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
				return time.Unix(n, 0).UTC()
			}
		}
	}
	return time.Time{}
}
