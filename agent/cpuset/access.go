package cpuset

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/knob"
)

// Access reaches a cgroup v2 cpuset.cpus file. It reads and writes like a
// file, except when a restore asks for "" (no restriction: inherit the
// parent's CPUs) on a cgroup that holds processes: kernels before 7.0
// refuse to empty its cpuset.cpus (ENOSPC, validate_change; Linux 7.0
// moved the check to cgroup v1 only). The Access then writes every online
// CPU, which gives the cgroup the same CPUs (a v2 cgroup's effective CPUs
// are its cpuset.cpus within its parent's), and reports the substitution
// (knob.Substituted), so a revert completes instead of leaving the
// confinement in place: init.scope (PID 1) stayed on the reserved CPUs
// after a revert on Debian 6.12 with systemd (make test-node-stack).
// A write of no bytes is a no-op that reports success, so "" is written as
// a newline. The journal records its entries as kind "cpuset".
var Access = &knob.Access{Name: "cpuset", InRoot: true,
	Read:  func(env knob.Env, path string) (string, error) { return env.Root.ReadString(path) },
	Write: writeCPUs,
}

func writeCPUs(env knob.Env, path, value string) error {
	// A write of no bytes never reaches the cgroup's handler: "" would
	// leave the file as it is and report success (init.scope kept the
	// reserved CPUs that way). An empty list is written as a newline.
	write := value
	if strings.TrimSpace(write) == "" {
		write = "\n"
	}
	err := env.Root.WriteString(path, write)
	if err == nil || strings.TrimSpace(value) != "" || !errors.Is(err, syscall.ENOSPC) ||
		filepath.Base(path) != CPUsFile || !env.Root.Exists(filepath.Join(filepath.Dir(path), "cgroup.controllers")) {
		return err
	}
	online, oerr := cpulist.Online(env.Root)
	if oerr != nil {
		return fmt.Errorf("%w; %w", err, oerr)
	}
	if werr := env.Root.WriteString(path, online.String()); werr != nil {
		return fmt.Errorf("%w; writing every online CPU (%s) instead: %w", err, online, werr)
	}
	return &knob.Substituted{Wanted: value, Wrote: online.String(),
		Reason: fmt.Sprintf("the kernel refuses to empty the cpuset.cpus of a cgroup that holds processes (%v; Linux 7.0 allows it), so it holds every online CPU instead: the same CPUs, but a CPU brought online later is not added", err)}
}
