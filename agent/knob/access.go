package knob

import (
	"context"

	"latencytier.io/latencytier/agent/host"
)

// RunFunc runs a host tool (absolute argv[0]) as the transient unit named
// unit and waits for it (update-grub for staged boot arguments).
type RunFunc func(ctx context.Context, unit string, argv []string) error

// Env is what an Access reaches the host through.
type Env struct {
	Root *host.Root
	// Run runs a host tool; nil where no kind in use needs one.
	Run RunFunc
}

// Access is how the engine reaches one kind of knob's value: a kernel
// file, a systemd unit property, a thread's scheduling policy, staged boot
// arguments. A Knob carries its Access, the journal records its Name beside
// each entry, so a revert finds the same Access without the knob, and the
// engine reads, writes and restores every kind alike. A new kind is one new
// Access (a row in agent/access), not a case in the engine.
type Access struct {
	// Name is what the journal records as the entry's kind ("file",
	// "systemd", "thread", "bootargs", "cpuset"). Never renamed: journals on nodes
	// name it.
	Name string
	// Read returns the value at addr (the knob's Path).
	Read func(env Env, addr string) (string, error)
	// Write writes value at addr.
	Write func(env Env, addr, value string) error
	// InRoot: addrs are files under the host root; the journal records
	// them relative to it, and a restore confines them to it, so an edited
	// journal cannot point outside. Other addrs are names, kept as they are.
	InRoot bool
	// SurvivesReboot: the value lives on disk, not in the running kernel,
	// so a reboot does not undo it and its journal entry outlives the boot.
	SurvivesReboot bool
	// NeedsHostPID: restoring the value needs the host's pid namespace
	// (a thread's policy). Such an entry is never given up after failed
	// restores, and the engine counts the ones it holds (Report.HeldThreads)
	// so the manager keeps the agent's hostPID while any is left.
	NeedsHostPID bool
	// Claims recognises this kind's addrs where no kind is recorded: knobs
	// built without an Access, and journal entries written before entries
	// recorded their kind (the "sched:", "systemd:" and "bootargs:"
	// prefixes). Nil for File, the kind of every addr no other claims.
	Claims func(addr string) bool
}

// File is the Access of a kernel (or cgroup, or state) file under the host
// root: the kind of every knob that names no other.
var File = &Access{
	Name:   "file",
	InRoot: true,
	Read:   func(env Env, path string) (string, error) { return env.Root.ReadString(path) },
	Write:  func(env Env, path, value string) error { return env.Root.WriteString(path, value) },
}

// Substituted is what an Access's Write returns when the kernel refuses the
// value it was asked to restore and the Access wrote the nearest equivalent
// instead: the cpuset.cpus of a cgroup v2 cgroup that holds processes
// cannot be emptied before Linux 7.0 (ENOSPC), so "" (inherit the parent's
// CPUs) is restored as every online CPU, the same CPUs. Revert treats it as
// a restore and reports Reason; an apply treats it as the error it is.
// Wrote equal to Wanted says the value itself was restored and Reason
// names what around it could not be (systemd's runtime drop-in).
type Substituted struct {
	// Wanted is the value asked for and Wrote the one written instead.
	Wanted, Wrote string
	// Reason says why, for the setting's status message.
	Reason string
}

func (s *Substituted) Error() string {
	if s.Wrote == s.Wanted {
		return s.Reason
	}
	return "restored as " + quote(s.Wrote) + ", not " + quote(s.Wanted) + ": " + s.Reason
}

func quote(s string) string { return `"` + s + `"` }
