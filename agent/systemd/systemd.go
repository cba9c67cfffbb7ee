// Package systemd confines system slices through systemd itself on cgroup
// v2 hosts: the runtime unit property AllowedCPUs, set over D-Bus
// (SetUnitProperties, runtime=true), so a daemon-reload or any unit change
// that makes systemd rewrite cpuset.cpus keeps the confinement instead of
// silently undoing it. It talks to systemd's private socket
// (/run/systemd/private under the host root), the peer-to-peer endpoint
// systemctl uses as root, so no D-Bus daemon is needed.
//
// The agent does not reload systemd for AllowedCPUs. It does reload it in
// one case, irqbalance's fallback (agent/irqbalance): without its control
// socket, irqbalance is banned through a runtime drop-in of
// irqbalance.service, which takes a daemon-reload and a try-restart of that
// unit (service.go), on apply and again on revert.
//
// A unit property is a knob like a file: its Path is "systemd:<unit>/
// AllowedCPUs" and its value a cpulist ("" for no restriction); the engine
// reads and writes such paths through Read and Write, so the journal keeps
// the original and revert puts it back.
package systemd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/internal/settingid"
)

// Prefix starts the path of a systemd unit property knob.
const Prefix = "systemd:"

// AllowedCPUs is the unit property that confines a unit's cpuset.
const AllowedCPUs = "AllowedCPUs"

const (
	dest        = "org.freedesktop.systemd1"
	managerPath = dbus.ObjectPath("/org/freedesktop/systemd1")
	manager     = "org.freedesktop.systemd1.Manager"
	noSuchUnit  = "org.freedesktop.systemd1.NoSuchUnit"
)

// callTimeout bounds each exchange with systemd: a call systemd never
// answers (seen on real systemd 252 in the kernel VMs) must fail the setting,
// not stall the agent's pass forever.
var callTimeout = 10 * time.Second

// Booted reports whether systemd is the host's init (sd_booted: the
// directory /run/systemd/system exists) and its private socket is there.
func Booted(root *host.Root) bool {
	return root.IsDir(root.Path("run", "systemd", "system")) && root.Exists(socket(root))
}

func socket(root *host.Root) string { return root.Path("run", "systemd", "private") }

// Path is the knob path of unit's AllowedCPUs.
func Path(unit string) string { return Prefix + unit + "/" + AllowedCPUs }

// IsPath reports whether a knob or journal path names a unit property.
func IsPath(p string) bool { return strings.HasPrefix(p, Prefix) }

// Access reaches a unit property over systemd's D-Bus (Read, Write); the
// journal records its entries as kind "systemd".
var Access = &knob.Access{Name: "systemd", Claims: IsPath,
	Read:  func(env knob.Env, path string) (string, error) { return Read(env.Root, path) },
	Write: func(env knob.Env, path, value string) error { return Write(env.Root, path, value) },
}

func parsePath(p string) (unit string, err error) {
	rest, ok := strings.CutPrefix(p, Prefix)
	unit, prop, found := strings.Cut(rest, "/")
	if !ok || !found || prop != AllowedCPUs || unit == "" || strings.ContainsAny(unit, "/ ") {
		return "", fmt.Errorf("not a systemd AllowedCPUs path: %q", p)
	}
	return unit, nil
}

// Read returns the unit's AllowedCPUs as a cpulist ("" when unrestricted).
// A unit systemd does not know reads as fs.ErrNotExist (gone).
func Read(root *host.Root, path string) (string, error) {
	unit, err := parsePath(path)
	if err != nil {
		return "", err
	}
	s, err := open(root)
	if err != nil {
		return "", err
	}
	defer s.close()
	set, err := s.allowed(unit)
	if err != nil {
		return "", err
	}
	return set.String(), nil
}

// Write sets the unit's AllowedCPUs for this boot (runtime=true: kept in
// /run/systemd/system.control across daemon-reload, gone at reboot).
// value is a cpulist; "" lifts the restriction.
//
// The kernel refuses to empty the cpuset.cpus of a cgroup that holds
// processes (ENOSPC: a populated system.slice on 6.1 and 6.12), and systemd
// then leaves the confinement in place. So a restriction is lifted by
// first widening it to every online CPU, which the kernel accepts, and
// then lifting it: where the kernel refuses "", the slice keeps every CPU
// instead of the confinement; elsewhere cpuset.cpus is "" again.
func Write(root *host.Root, path, value string) error {
	unit, err := parsePath(path)
	if err != nil {
		return err
	}
	set, err := cpulist.Parse(value)
	if err != nil {
		return err
	}
	s, err := open(root)
	if err != nil {
		return err
	}
	defer s.close()
	if set.IsEmpty() {
		cur, err := s.allowed(unit)
		if err != nil {
			return err
		}
		if !cur.IsEmpty() {
			online, err := cpulist.Online(root)
			if err != nil {
				return err
			}
			if err := s.setAllowed(unit, online); err != nil {
				return err
			}
		}
	}
	if err := s.setAllowed(unit, set); err != nil || !set.IsEmpty() {
		return err
	}
	return s.lifted(root, unit)
}

// lifted reports what stays behind once unit's AllowedCPUs is empty again
// (knob.Substituted with the value itself restored): systemd keeps the
// setting in a runtime drop-in until the next boot (the agent never removes
// it: that would take a daemon-reload of its own, and the agent reloads
// systemd only for irqbalance's drop-in, a reload that keeps this one,
// which restricts nothing), and the kernel keeps a populated cgroup's
// cpuset.cpus at every online CPU (before Linux 7.0 it refuses to empty
// it). Nothing stays: nil.
func (s *session) lifted(root *host.Root, unit string) error {
	var notes []string
	dropIn := root.Path("run", "systemd", "system.control", unit+".d", "50-"+AllowedCPUs+".conf")
	if root.Exists(dropIn) {
		notes = append(notes, fmt.Sprintf("systemd keeps the empty %s in its runtime drop-in %s until the next boot (it restricts nothing; removing it would take a daemon-reload, which the agent does only for irqbalance's drop-in)",
			AllowedCPUs, filepath.Join("/", strings.TrimPrefix(dropIn, root.Path()))))
	}
	if cg, err := s.controlGroup(unit); err == nil && cg != "" {
		if cpus, err := root.ReadString(root.Path("sys", "fs", "cgroup", strings.TrimPrefix(cg, "/"), "cpuset.cpus")); err == nil && cpus != "" {
			notes = append(notes, fmt.Sprintf("the kernel keeps %s's cpuset.cpus at %s, every online CPU: it refuses to empty the cpuset.cpus of a cgroup that holds processes before Linux 7.0 (ENOSPC)", unit, cpus))
		}
	}
	if len(notes) == 0 {
		return nil
	}
	return &knob.Substituted{Reason: AllowedCPUs + " restored (no restriction); " + strings.Join(notes, "; ")}
}

// controlGroup is unit's cgroup path ("/system.slice"), "" when it has none.
func (s *session) controlGroup(unit string) (string, error) {
	var obj dbus.ObjectPath
	if err := s.conn.Object(dest, managerPath).CallWithContext(s.ctx, manager+".GetUnit", 0, unit).Store(&obj); err != nil {
		return "", busError("GetUnit "+unit, err)
	}
	var v dbus.Variant
	if err := s.conn.Object(dest, obj).CallWithContext(s.ctx, "org.freedesktop.DBus.Properties.Get", 0,
		unitInterface(unit), "ControlGroup").Store(&v); err != nil {
		return "", busError("reading "+unit+" ControlGroup", err)
	}
	cg, _ := v.Value().(string)
	return cg, nil
}

// session is one connection to systemd and the deadline of its calls.
type session struct {
	conn   *dbus.Conn
	ctx    context.Context
	cancel context.CancelFunc
}

func open(root *host.Root) (*session, error) {
	conn, err := dial(root)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	return &session{conn: conn, ctx: ctx, cancel: cancel}, nil
}

func (s *session) close() {
	s.cancel()
	s.conn.Close()
}

// allowed is the unit's AllowedCPUs.
func (s *session) allowed(unit string) (cpuset.CPUSet, error) {
	var obj dbus.ObjectPath
	if err := s.conn.Object(dest, managerPath).CallWithContext(s.ctx, manager+".GetUnit", 0, unit).Store(&obj); err != nil {
		return cpuset.New(), busError("GetUnit "+unit, err)
	}
	var v dbus.Variant
	if err := s.conn.Object(dest, obj).CallWithContext(s.ctx, "org.freedesktop.DBus.Properties.Get", 0,
		unitInterface(unit), AllowedCPUs).Store(&v); err != nil {
		return cpuset.New(), busError("reading "+unit+" "+AllowedCPUs, err)
	}
	mask, ok := v.Value().([]byte)
	if !ok {
		return cpuset.New(), fmt.Errorf("%s %s has D-Bus type %s, want ay", unit, AllowedCPUs, v.Signature())
	}
	return fromMask(mask)
}

// setAllowed sets the unit's AllowedCPUs at runtime.
func (s *session) setAllowed(unit string, set cpuset.CPUSet) error {
	props := []property{{Name: AllowedCPUs, Value: dbus.MakeVariant(toMask(set))}}
	if err := s.conn.Object(dest, managerPath).CallWithContext(s.ctx, manager+".SetUnitProperties", 0, unit, true, props).Err; err != nil {
		return busError("setting "+unit+" "+AllowedCPUs, err)
	}
	return nil
}

// property is the D-Bus (sv) pair SetUnitProperties takes.
type property struct {
	Name  string
	Value dbus.Variant
}

// dial connects to systemd's private socket and authenticates (see
// authenticate for why not with godbus's own handshake).
func dial(root *host.Root) (*dbus.Conn, error) {
	c, err := net.DialTimeout("unix", socket(root), callTimeout)
	if err != nil {
		return nil, fmt.Errorf("connecting to systemd at %s: %w", socket(root), err)
	}
	conn, err := authenticate(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("authenticating to systemd at %s: %w", socket(root), err)
	}
	return conn, nil
}

func busError(what string, err error) error {
	var de dbus.Error
	if errors.As(err, &de) && de.Name == noSuchUnit {
		return fmt.Errorf("%s: %w (%v)", what, fs.ErrNotExist, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// unitInterface is the D-Bus interface holding a unit type's cgroup
// properties ("system.slice" → org.freedesktop.systemd1.Slice).
func unitInterface(unit string) string {
	kind := unit[strings.LastIndex(unit, ".")+1:]
	if kind == "" {
		return "org.freedesktop.systemd1.Unit"
	}
	return "org.freedesktop.systemd1." + strings.ToUpper(kind[:1]) + kind[1:]
}

// toMask is systemd's D-Bus form of a CPU set: bit c%8 of byte c/8 for
// every CPU c; the empty set is an empty array.
func toMask(set cpuset.CPUSet) []byte {
	cpus := set.List()
	if len(cpus) == 0 {
		return []byte{}
	}
	mask := make([]byte, cpus[len(cpus)-1]/8+1)
	for _, c := range cpus {
		mask[c/8] |= 1 << (c % 8)
	}
	return mask
}

// fromMask is the CPU set of a systemd D-Bus mask, refusing masks for more
// than cpulist.MaxCPUs CPUs.
func fromMask(mask []byte) (cpuset.CPUSet, error) {
	if len(mask) > cpulist.MaxCPUs/8 {
		return cpuset.New(), fmt.Errorf("CPU mask of %d bytes names CPUs beyond %d", len(mask), cpulist.MaxCPUs)
	}
	var cpus []int
	for i, b := range mask {
		for bit := 0; bit < 8; bit++ {
			if b&(1<<bit) != 0 {
				cpus = append(cpus, i*8+bit)
			}
		}
	}
	return cpuset.New(cpus...), nil
}

// Slices are the units whose CPUs the agent confines through systemd.
var Slices = []string{"system.slice", "user.slice"}

// knobID is the setting name of unit's AllowedCPUs knob.
func knobID(unit string) string { return settingid.CPUSet.ID(unit, AllowedCPUs) }

// Knob sets unit's AllowedCPUs to cpus for this boot.
func Knob(unit string, cpus cpuset.CPUSet) knob.Knob {
	return knob.Knob{ID: knobID(unit), Path: Path(unit), Access: Access, Desired: cpus.String(), Equal: equal,
		Label: unit + " " + AllowedCPUs + " (systemd, runtime)"}
}

// equal compares cpulists by their CPUs ("" is the empty set).
func equal(actual, want string) bool {
	a, errA := cpulist.Parse(actual)
	w, errW := cpulist.Parse(want)
	if errA != nil || errW != nil {
		return strings.TrimSpace(actual) == strings.TrimSpace(want)
	}
	return a.Equals(w)
}
