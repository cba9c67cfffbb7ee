// Package access is the table of the ways the agent reaches a knob's value
// (knob.Access): kernel files, systemd unit properties, threads' scheduling
// policies, staged boot arguments, cpusets, irqbalance's banned CPUs
// (through its socket, or its environment in a runtime drop-in), the
// sched_ext scheduler class (agent/tiersched). The
// apply engine resolves the Access of a knob or of a journal entry here and
// never asks which kind it is.
package access

import (
	"context"
	"fmt"
	"time"

	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/cpuset"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/irqbalance"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/rtsched"
	"latencytier.io/latencytier/agent/systemd"
	"latencytier.io/latencytier/agent/tiersched"
)

// All lists every Access, one row per kind; a new kind is a new row.
var All = []*knob.Access{knob.File, systemd.Access, rtsched.Access, bootargs.Access, cpuset.Access, irqbalance.Access, irqbalance.DropInAccess, tiersched.Access}

// Of is a knob's Access: its own, or that of its path (ByAddress) for a
// knob built without one.
func Of(k knob.Knob) *knob.Access {
	if k.Access != nil {
		return k.Access
	}
	return ByAddress(k.Path)
}

// ByAddress is the Access whose Claims accept addr, File when none does.
func ByAddress(addr string) *knob.Access {
	for _, a := range All {
		if a.Claims != nil && a.Claims(addr) {
			return a
		}
	}
	return knob.File
}

// Named is the Access the journal records as kind.
func Named(kind string) (*knob.Access, error) {
	for _, a := range All {
		if a.Name == kind {
			return a, nil
		}
	}
	return nil, fmt.Errorf("journal entry of kind %q, which this agent does not know (written by a newer agent?)", kind)
}

// Entry is a journal entry's Access: the kind it records, or, for an entry
// written before entries recorded their kind, the kind its path claims.
func Entry(en journal.Entry) (*knob.Access, error) {
	if en.Kind == "" {
		return ByAddress(en.Path), nil
	}
	return Named(en.Kind)
}

// Migrate records the kind of every entry of j written before entries
// recorded their kind, so the next save writes it.
func Migrate(j *journal.Journal) {
	for i := range j.Entries {
		if en := &j.Entries[i]; en.Kind == "" {
			en.Kind = ByAddress(en.Path).Name
		}
	}
}

// hostToolTimeout bounds one host tool run (update-grub on a slow disk).
const hostToolTimeout = 5 * time.Minute

// HostTool runs a host tool through systemd on the host (a transient unit,
// never the agent entering the host's namespaces).
func HostTool(root *host.Root) knob.RunFunc {
	return func(ctx context.Context, unit string, argv []string) error {
		return systemd.Run(ctx, root, unit, argv, hostToolTimeout)
	}
}
