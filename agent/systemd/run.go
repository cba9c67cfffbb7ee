package systemd

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"time"

	"github.com/godbus/dbus/v5"

	"latencytier.io/latencytier/agent/host"
)

// unitName is what a transient unit the agent starts may be called.
var unitName = regexp.MustCompile(`^latencytier-[a-z0-9-]{1,64}\.service$`)

// execCommand is the D-Bus (sasb) triple of ExecStart: path, argv, and
// whether a failure is ignored.
type execCommand struct {
	Path    string
	Argv    []string
	Ignored bool
}

// Run runs argv on the host as a transient oneshot service called unit
// (latencytier-<name>.service), as `systemd-run --wait` does: the host's
// own tool in the host's namespaces and root, started by systemd, not by
// the agent entering them. It waits until the service finished, at most
// timeout, and returns an error naming its result and exit status when it
// failed. argv[0] is an absolute path; nothing runs through a shell.
func Run(ctx context.Context, root *host.Root, unit string, argv []string, timeout time.Duration) error {
	if !unitName.MatchString(unit) {
		return fmt.Errorf("transient unit %q: want latencytier-<name>.service", unit)
	}
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		return fmt.Errorf("transient unit %s: argv %q does not start with an absolute path", unit, argv)
	}
	conn, err := dial(root)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m := conn.Object(dest, managerPath)
	// A unit of this name left from an earlier run (failed, or an agent
	// that died waiting) would make StartTransientUnit fail: clear it.
	_ = m.CallWithContext(ctx, manager+".ResetFailedUnit", 0, unit).Err
	_ = m.CallWithContext(ctx, manager+".StopUnit", 0, unit, "replace").Err
	props := []property{
		{Name: "Description", Value: dbus.MakeVariant("latencytier agent: " + filepath.Base(argv[0]))},
		{Name: "Type", Value: dbus.MakeVariant("oneshot")},
		// Kept after it exits, so its result can be read; stopped below.
		{Name: "RemainAfterExit", Value: dbus.MakeVariant(true)},
		{Name: "ExecStart", Value: dbus.MakeVariant([]execCommand{{Path: argv[0], Argv: argv}})},
	}
	var job dbus.ObjectPath
	aux := []struct {
		Name  string
		Props []property
	}{}
	if err := m.CallWithContext(ctx, manager+".StartTransientUnit", 0, unit, "fail", props, aux).Store(&job); err != nil {
		return busError("starting "+unit, err)
	}
	defer func() {
		stop, done := context.WithTimeout(context.Background(), callTimeout)
		defer done()
		_ = m.CallWithContext(stop, manager+".StopUnit", 0, unit, "replace").Err
		_ = m.CallWithContext(stop, manager+".ResetFailedUnit", 0, unit).Err
	}()
	var obj dbus.ObjectPath
	if err := m.CallWithContext(ctx, manager+".GetUnit", 0, unit).Store(&obj); err != nil {
		return busError("GetUnit "+unit, err)
	}
	for {
		state, err := stringProp(ctx, conn, obj, "org.freedesktop.systemd1.Unit", "ActiveState")
		if err != nil {
			return err
		}
		switch state {
		case "active":
			return nil
		case "failed", "inactive":
			result, _ := stringProp(ctx, conn, obj, "org.freedesktop.systemd1.Service", "Result")
			if state == "inactive" && result == "success" {
				// The start job has not run yet: a oneshot that ran and
				// succeeded stays active (RemainAfterExit), so inactive
				// with a success result is before its start, not after.
				break
			}
			var status dbus.Variant
			_ = conn.Object(dest, obj).CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0,
				"org.freedesktop.systemd1.Service", "ExecMainStatus").Store(&status)
			return fmt.Errorf("%s (%s) %s: result %s, exit status %v", unit, argv[0], state, result, status.Value())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s (%s) still %s after %s: %w", unit, argv[0], state, timeout, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func stringProp(ctx context.Context, conn *dbus.Conn, obj dbus.ObjectPath, iface, name string) (string, error) {
	var v dbus.Variant
	if err := conn.Object(dest, obj).CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, iface, name).Store(&v); err != nil {
		return "", busError("reading "+string(obj)+" "+name, err)
	}
	s, ok := v.Value().(string)
	if !ok {
		return "", fmt.Errorf("%s %s has D-Bus type %s, want s", obj, name, v.Signature())
	}
	return s, nil
}

// Reboot asks systemd to reboot the host (reboot.target, as `systemctl
// reboot` does: services stop in order, filesystems unmount), never sysrq.
func Reboot(ctx context.Context, root *host.Root) error {
	conn, err := dial(root)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var job dbus.ObjectPath
	if err := conn.Object(dest, managerPath).CallWithContext(ctx, manager+".StartUnit", 0, "reboot.target", "replace-irreversibly").Store(&job); err != nil {
		return busError("starting reboot.target", err)
	}
	return nil
}
