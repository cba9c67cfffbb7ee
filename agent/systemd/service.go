package systemd

import (
	"context"
	"fmt"
	"time"

	"github.com/godbus/dbus/v5"

	"latencytier.io/latencytier/agent/host"
)

// Service is what systemd says of a loaded service unit.
type Service struct {
	// LoadState ("loaded", "not-found", ...) and ActiveState ("active",
	// "inactive", "failed", ...) are the unit's.
	LoadState, ActiveState string
	// MainPID is its main process, 0 when none runs.
	MainPID int
	// Environment is what its Environment= settings assign ("KEY=VALUE"),
	// drop-ins included; its EnvironmentFile= files are not in it.
	Environment []string
	// DropInPaths are the drop-in files systemd loaded for it (at its last
	// daemon-reload), as the host names them.
	DropInPaths []string
}

// ReadService reads unit's load and active state and main pid. A unit
// systemd has not loaded reads as fs.ErrNotExist.
func ReadService(root *host.Root, unit string) (Service, error) {
	s, err := open(root)
	if err != nil {
		return Service{}, err
	}
	defer s.close()
	return s.service(unit)
}

func (s *session) service(unit string) (Service, error) {
	var obj dbus.ObjectPath
	if err := s.conn.Object(dest, managerPath).CallWithContext(s.ctx, manager+".GetUnit", 0, unit).Store(&obj); err != nil {
		return Service{}, busError("GetUnit "+unit, err)
	}
	var out Service
	var err error
	if out.LoadState, err = stringProp(s.ctx, s.conn, obj, "org.freedesktop.systemd1.Unit", "LoadState"); err != nil {
		return Service{}, busError("reading "+unit+" LoadState", err)
	}
	if out.ActiveState, err = stringProp(s.ctx, s.conn, obj, "org.freedesktop.systemd1.Unit", "ActiveState"); err != nil {
		return Service{}, busError("reading "+unit+" ActiveState", err)
	}
	var v dbus.Variant
	if err := s.conn.Object(dest, obj).CallWithContext(s.ctx, "org.freedesktop.DBus.Properties.Get", 0,
		"org.freedesktop.systemd1.Unit", "DropInPaths").Store(&v); err != nil {
		return Service{}, busError("reading "+unit+" DropInPaths", err)
	}
	var ok bool
	if out.DropInPaths, ok = v.Value().([]string); !ok {
		return Service{}, fmt.Errorf("%s DropInPaths has D-Bus type %s, want as", unit, v.Signature())
	}
	if err := s.conn.Object(dest, obj).CallWithContext(s.ctx, "org.freedesktop.DBus.Properties.Get", 0,
		"org.freedesktop.systemd1.Service", "MainPID").Store(&v); err != nil {
		return Service{}, busError("reading "+unit+" MainPID", err)
	}
	pid, ok := v.Value().(uint32)
	if !ok {
		return Service{}, fmt.Errorf("%s MainPID has D-Bus type %s, want u", unit, v.Signature())
	}
	out.MainPID = int(pid)
	if err := s.conn.Object(dest, obj).CallWithContext(s.ctx, "org.freedesktop.DBus.Properties.Get", 0,
		"org.freedesktop.systemd1.Service", "Environment").Store(&v); err != nil {
		return Service{}, busError("reading "+unit+" Environment", err)
	}
	if out.Environment, ok = v.Value().([]string); !ok {
		return Service{}, fmt.Errorf("%s Environment has D-Bus type %s, want as", unit, v.Signature())
	}
	return out, nil
}

// ReloadTryRestart makes systemd reread its unit files (daemon-reload, so a
// drop-in written or removed under /run/systemd/system takes effect) and
// restarts unit if it runs (try-restart: a stopped unit stays stopped). It
// waits, at most timeout, until the unit is active again with a new main
// process, and returns that pid; 0 when the unit was not running.
func ReloadTryRestart(root *host.Root, unit string, timeout time.Duration) (int, error) {
	s, err := open(root)
	if err != nil {
		return 0, err
	}
	before, err := s.service(unit)
	if err != nil {
		s.close()
		return 0, err
	}
	err = s.conn.Object(dest, managerPath).CallWithContext(s.ctx, manager+".Reload", 0).Err
	s.close()
	if err != nil {
		return 0, busError("daemon-reload", err)
	}
	// A fresh connection: systemd may drop its clients while it reloads.
	if s, err = open(root); err != nil {
		return 0, err
	}
	defer s.close()
	var job dbus.ObjectPath
	if err := s.conn.Object(dest, managerPath).CallWithContext(s.ctx, manager+".TryRestartUnit", 0, unit, "replace").Store(&job); err != nil {
		return 0, busError("try-restart "+unit, err)
	}
	if before.ActiveState != "active" && before.ActiveState != "activating" && before.ActiveState != "reloading" {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		s.ctx = ctx
		now, err := s.service(unit)
		if err == nil && now.ActiveState == "active" && now.MainPID != 0 && now.MainPID != before.MainPID {
			return now.MainPID, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s did not come back with a new main process within %s after its restart (now %s, pid %d, was pid %d): %v",
				unit, timeout, now.ActiveState, now.MainPID, before.MainPID, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
