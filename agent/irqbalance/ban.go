package irqbalance

import (
	"bytes"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/internal/settingid"
)

// BanID is the setting of irqbalance's banned CPUs.
var BanID = settingid.IRQ.ID("irqbalance")

// banPath is the ban knob's address: the running irqbalance, whichever pid
// it has now, so a restarted irqbalance (which forgot the ban) is found
// and sent the ban again.
const banPath = "irqbalance:banned"

// IsPath reports whether a knob or journal path names irqbalance's ban.
func IsPath(p string) bool { return p == banPath }

// awaitMax bounds how long a write waits for irqbalance to take a ban: its
// next balancing pass (10 s by default).
var awaitMax = 20 * time.Second

// Access reaches the running irqbalance's banned CPUs through its control
// socket; the journal records its entries as kind "irqbalance". The value
// is "" when irqbalance bans what its environment or the kernel says (no
// ban set through the socket, or one equal to that), else the cpulist it
// bans: writing "" sends `settings cpus NULL`, a cpulist `settings cpus
// <list>`, so revert puts back exactly what was there. A write returns once
// irqbalance took the ban (its next balancing pass). Without a running
// irqbalance, or without its socket, a read fails as absent (fs.ErrNotExist):
// the setting is Unsupported, and a restart of irqbalance drops a ban set
// through the socket, so there is nothing left to restore.
var Access = &knob.Access{Name: "irqbalance", Claims: IsPath,
	Read:  func(env knob.Env, path string) (string, error) { return read(env.Root, path) },
	Write: func(env knob.Env, path, value string) error { return write(env.Root, path, value) },
}

// daemon is the running irqbalance as one read found it.
type daemon struct {
	pid  int
	sock string
	// setup is its answer to `setup`.
	setup Setup
	// envBan is what it bans without a ban set through the socket;
	// envErr says why that is unknown.
	envBan cpuset.CPUSet
	envErr error
}

// value is the knob value of what d bans.
func (d daemon) value() string {
	if d.envErr == nil && d.setup.Banned.Equals(d.envBan) {
		return ""
	}
	return d.setup.Banned.String()
}

// errAbsent marks a read that found no irqbalance, or none with a socket.
type errAbsent struct{ msg string }

func (e errAbsent) Error() string { return e.msg }
func (errAbsent) Is(t error) bool { return t == fs.ErrNotExist }

// find reads the running irqbalance: its pid (agent/facts: the host's
// irqbalance binary), socket, setup and environment's ban.
func find(root *host.Root) (daemon, error) {
	ibs := facts.IRQBalances(root)
	if len(ibs) == 0 {
		return daemon{}, errAbsent{"irqbalance is not running"}
	}
	return inspect(root, ibs[0].PID)
}

// inspect reads irqbalance pid's socket, setup and environment's ban.
func inspect(root *host.Root, pid int) (daemon, error) {
	d := daemon{pid: pid}
	if d.sock = Socket(root, d.pid); d.sock == "" {
		_, why := dropInKnob(root, d.pid, cpuset.New())
		if why == "" {
			why = "it is possible now, and the next pass uses it"
		}
		return d, errAbsent{fmt.Sprintf("irqbalance (pid %d) has no control socket irqbalance%d.sock in its /run/irqbalance (built without its UI, older than 1.8, or its run directory is missing), and the agent's fallback, a runtime drop-in of %s, is not possible: %s. Ban the CPUs with %s in irqbalance's environment and restart it, or give it back its socket", d.pid, d.pid, Unit, why, cpulistEnv)}
	}
	var err error
	if d.setup, err = ReadSetup(d.sock); err != nil {
		return d, fmt.Errorf("irqbalance (pid %d): %w", d.pid, err)
	}
	d.envBan, d.envErr = EnvBan(root, environ(root, d.pid))
	return d, nil
}

// environ is process pid's environment (untrusted, bounded).
func environ(root *host.Root, pid int) []string {
	b, err := root.ReadFile(root.Proc(strconv.Itoa(pid), "environ"))
	if err != nil || len(b) > 1<<20 {
		return nil
	}
	var out []string
	for _, kv := range bytes.Split(b, []byte{0}) {
		if len(kv) > 0 {
			out = append(out, string(kv))
		}
	}
	return out
}

func read(root *host.Root, path string) (string, error) {
	if !IsPath(path) {
		return "", fmt.Errorf("not irqbalance's ban: %q", path)
	}
	d, err := find(root)
	if err != nil {
		return "", err
	}
	return d.value(), nil
}

func write(root *host.Root, path, value string) error {
	if !IsPath(path) {
		return fmt.Errorf("not irqbalance's ban: %q", path)
	}
	want, err := cpulist.Parse(value)
	if err != nil {
		return fmt.Errorf("irqbalance's ban %q: %w", value, err)
	}
	d, err := find(root)
	if err != nil {
		return err
	}
	if want.IsEmpty() {
		if d.envErr != nil {
			return fmt.Errorf("irqbalance (pid %d): lifting the ban set through its socket: %w", d.pid, d.envErr)
		}
		if err := SetBanned(d.sock, cpuset.New()); err != nil {
			return fmt.Errorf("irqbalance (pid %d): %w", d.pid, err)
		}
		want = d.envBan
	} else if err := SetBanned(d.sock, want); err != nil {
		return fmt.Errorf("irqbalance (pid %d): %w", d.pid, err)
	}
	if _, err := Await(d.sock, want, awaitMax); err != nil {
		return fmt.Errorf("irqbalance (pid %d): %w", d.pid, err)
	}
	return nil
}

// Running is the irqbalance a pass found: its pid, 0 when none runs.
type Running struct {
	PID int
	// Ban is the knob that bans the CPUs asked for; nil when none were.
	Ban *knob.Knob
}

// Find looks for a running irqbalance and, when one runs and cpus is not
// empty, renders the knob that bans cpus from it through its socket, on top
// of what it bans already (its environment's ban, the kernel's isolated
// CPUs, an administrator's ban through the socket stay banned). Without a
// socket, where systemd runs irqbalance as irqbalance.service, the knob is
// the runtime drop-in that bans them through its environment (dropin.go).
// The knob's note says how the ban is held; without either its read fails
// and the setting is Unsupported with the reason.
func Find(root *host.Root, cpus cpuset.CPUSet) Running {
	ibs := facts.IRQBalances(root)
	if len(ibs) == 0 {
		return Running{}
	}
	r := Running{PID: ibs[0].PID}
	if cpus.IsEmpty() {
		return r
	}
	if k, _ := dropInKnob(root, r.PID, cpus); k != nil {
		r.Ban = k
		return r
	}
	k := knob.Knob{ID: BanID, Path: banPath, Access: Access, Desired: cpus.String(), Equal: cpulist.Equal,
		Label: fmt.Sprintf("irqbalance (pid %d)'s banned CPUs", r.PID),
		// irqbalance restarted, or an administrator changed its ban
		// through the socket: that is what revert puts back.
		OriginalFollowsWriter: true}
	if d, err := inspect(root, r.PID); err == nil {
		k.Desired, k.Note = d.ban(cpus)
		k.Equal = d.bans(cpus)
	}
	r.Ban = &k
	return r
}

// ban is the value that bans cpus from d on top of what it bans now, and
// a message (knob.Note) saying how: "" (nothing to send) when it bans them already
// without a ban set through its socket.
// bans is the ban knob's Equal: a value holds when it bans cpus, whatever
// else it bans. The value wanted changes with what irqbalance bans besides
// (a restart forgets the ban set through the socket, and with it an
// administrator's), so a value the agent verified before is compared by
// what it was for: a restarted irqbalance's value is then drift, whose
// value becomes the one revert restores.
func (d daemon) bans(cpus cpuset.CPUSet) func(actual, _ string) bool {
	return func(actual, _ string) bool {
		if actual == "" {
			return d.envErr == nil && cpus.IsSubsetOf(d.envBan)
		}
		set, err := cpulist.Parse(actual)
		return err == nil && cpus.IsSubsetOf(set)
	}
}

func (d daemon) ban(cpus cpuset.CPUSet) (value, note string) {
	value = d.value()
	if !cpus.IsSubsetOf(d.setup.Banned) {
		value = d.setup.Banned.Union(cpus).String()
	}
	all := d.setup.Banned.Union(cpus)
	if value == "" {
		return "", fmt.Sprintf("irqbalance (pid %d) bans CPUs %s from its environment or the kernel's isolated and nohz_full CPUs", d.pid, all)
	}
	return value, fmt.Sprintf("banned through irqbalance's socket (pid %d): CPUs %s", d.pid, all)
}

// WithSocketBans replaces the environment's ban of each irqbalance in ibs
// by what it bans now, as its socket reports it (the ban the agent set
// there included); ibs without a socket keep the environment's.
func WithSocketBans(root *host.Root, ibs []facts.IRQBalance) []facts.IRQBalance {
	for i := range ibs {
		if sock := Socket(root, ibs[i].PID); sock != "" {
			if s, err := ReadSetup(sock); err == nil {
				ibs[i].Banned = s.Banned
			}
		}
	}
	return ibs
}
