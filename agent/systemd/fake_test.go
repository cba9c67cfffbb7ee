package systemd_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/systemd"
)

// fakeSystemd answers on <root>/run/systemd/private the D-Bus calls the
// agent makes, over the real wire protocol (godbus on both ends). It models
// what matters here: SetUnitProperties keeps AllowedCPUs (runtime ones
// survive a reload) and realizes it into the slice's cpuset.cpus, and
// reload rewrites every slice's cpuset.cpus from AllowedCPUs, as systemd
// does on daemon-reload.
type fakeSystemd struct {
	root    *host.Root
	mu      sync.Mutex
	allowed map[string][]byte // unit → AllowedCPUs mask
	calls   []string
	// authPause is how long PID 1 takes to get to each read while it
	// authenticates a client (slow under emulation): whatever the client
	// sends meanwhile arrives in one read.
	authPause time.Duration
	// populated are the units whose cgroup holds processes: the kernel
	// refuses to empty their cpuset.cpus once set (ENOSPC), which systemd
	// logs and goes on.
	populated map[string]bool
}

func startFake(t *testing.T, root *host.Root, units map[string][]byte) *fakeSystemd {
	t.Helper()
	f := &fakeSystemd{root: root, allowed: units}
	listenPrivate(t, root, f.serve)
	return f
}

// listenPrivate serves every connection to <root>/run/systemd/private with
// serve, on a host root that looks systemd-booted, until the test ends.
func listenPrivate(t *testing.T, root *host.Root, serve func(net.Conn)) {
	t.Helper()
	if err := os.MkdirAll(root.Path("run", "systemd", "system"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", root.Path("run", "systemd", "private"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
}

// sdbusAuth is the server side of D-Bus authentication as sd-bus (PID 1's
// private socket) does it: it reads what the client sent in chunks of up
// to 256 bytes, answers each complete line, and leaves the authentication
// at BEGIN, returning what it read past BEGIN.
func sdbusAuth(c net.Conn, pause time.Duration) (pastBegin []byte, err error) {
	var buf []byte
	for at := 1; ; {
		time.Sleep(pause)
		chunk := make([]byte, 256)
		n, err := c.Read(chunk)
		if n == 0 {
			return nil, err
		}
		if buf = append(buf, chunk[:n]...); buf[0] != 0 {
			return nil, fmt.Errorf("no leading NUL")
		}
		for {
			end := bytes.Index(buf[at:], []byte("\r\n"))
			if end < 0 {
				break
			}
			line := string(buf[at : at+end])
			if at += end + 2; line == "BEGIN" {
				return buf[at:], nil
			}
			if _, err := io.WriteString(c, saslAnswer(line)); err != nil {
				return nil, err
			}
		}
	}
}

// saslAnswer is a server's answer to a client's authentication line:
// accept EXTERNAL and agree to fd passing.
func saslAnswer(line string) string {
	switch {
	case line == "AUTH":
		return "REJECTED EXTERNAL\r\n"
	case strings.HasPrefix(line, "AUTH EXTERNAL"):
		return "OK 0123456789abcdef0123456789abcdef\r\n"
	case line == "NEGOTIATE_UNIX_FD":
		return "AGREE_UNIX_FD\r\n"
	}
	return "ERROR\r\n"
}

// saslServer is the server side of D-Bus authentication over a stream that
// hides nothing (a bufio.Reader): it returns the reader after BEGIN.
func saslServer(rw io.ReadWriter) (*bufio.Reader, error) {
	br := bufio.NewReader(rw)
	if b, err := br.ReadByte(); err != nil || b != 0 {
		return nil, fmt.Errorf("no leading NUL: %v", err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if line = strings.TrimSpace(line); line == "BEGIN" {
			return br, nil
		}
		if _, err := io.WriteString(rw, saslAnswer(line)); err != nil {
			return nil, err
		}
	}
}

// serve authenticates the client as sd-bus does, then splices it to a
// godbus connection on which the fake's objects are exported (godbus has
// no server side; a second hand-made handshake over a pipe gives it one).
// Like sd-bus, whose event loop wakes only for a readable socket, it does
// not look at bytes it read past BEGIN until the client sends more or
// closes.
func (f *fakeSystemd) serve(c net.Conn) {
	defer c.Close()
	f.mu.Lock()
	pause := f.authPause
	f.mu.Unlock()
	pastBegin, err := sdbusAuth(c, pause)
	if err != nil {
		return
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	srv, err := dbus.NewConn(p2)
	if err != nil {
		return
	}
	defer srv.Close()
	done := make(chan *bufio.Reader, 1)
	go func() { br, _ := saslServer(p1); done <- br }()
	if err := srv.Auth([]dbus.Auth{dbus.AuthExternal("0")}); err != nil {
		return
	}
	fromSrv := <-done
	if fromSrv == nil {
		return
	}
	_ = srv.Export(manager{f}, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager")
	for unit := range f.allowed {
		_ = srv.Export(props{f, unit}, unitPath(unit), "org.freedesktop.DBus.Properties")
	}
	go func() { _, _ = io.Copy(c, fromSrv) }()
	if len(pastBegin) > 0 {
		more := make([]byte, 4096)
		n, rerr := c.Read(more)
		if _, err := p1.Write(append(pastBegin, more[:n]...)); err != nil || rerr != nil {
			return
		}
	}
	_, _ = io.Copy(p1, c)
}

func unitPath(unit string) dbus.ObjectPath {
	return dbus.ObjectPath("/org/freedesktop/systemd1/unit/" + strings.ReplaceAll(unit, ".", "_2e"))
}

type manager struct{ f *fakeSystemd }

func (m manager) GetUnit(name string) (dbus.ObjectPath, *dbus.Error) {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	if _, ok := m.f.allowed[name]; !ok {
		return "", &dbus.Error{Name: "org.freedesktop.systemd1.NoSuchUnit", Body: []any{"Unit " + name + " not loaded."}}
	}
	return unitPath(name), nil
}

func (m manager) SetUnitProperties(name string, runtime bool, ps []struct {
	Name  string
	Value dbus.Variant
}) *dbus.Error {
	m.f.mu.Lock()
	defer m.f.mu.Unlock()
	if _, ok := m.f.allowed[name]; !ok {
		return &dbus.Error{Name: "org.freedesktop.systemd1.NoSuchUnit", Body: []any{name}}
	}
	for _, p := range ps {
		mask, ok := p.Value.Value().([]byte)
		if p.Name != systemd.AllowedCPUs || !ok {
			return &dbus.Error{Name: "org.freedesktop.DBus.Error.InvalidArgs", Body: []any{p.Name}}
		}
		m.f.calls = append(m.f.calls, fmt.Sprintf("SetUnitProperties %s runtime=%v %s=%x", name, runtime, p.Name, mask))
		m.f.allowed[name] = mask
	}
	m.f.realize(name)
	return nil
}

type props struct {
	f    *fakeSystemd
	unit string
}

func (p props) Get(iface, prop string) (dbus.Variant, *dbus.Error) {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	if iface != "org.freedesktop.systemd1.Slice" || prop != systemd.AllowedCPUs {
		return dbus.Variant{}, &dbus.Error{Name: "org.freedesktop.DBus.Error.UnknownProperty", Body: []any{iface + "." + prop}}
	}
	return dbus.MakeVariant(p.f.allowed[p.unit]), nil
}

// realize writes a unit's AllowedCPUs into its cpuset.cpus, as systemd
// does (an empty set writes "": inherit the parent's CPUs), where the
// kernel takes it.
func (f *fakeSystemd) realize(unit string) {
	set, _ := systemd.FromMask(f.allowed[unit])
	file := filepath.Join(f.root.Cgroup(unit), "cpuset.cpus")
	if cur, err := os.ReadFile(file); err == nil && set.IsEmpty() && f.populated[unit] && strings.TrimSpace(string(cur)) != "" {
		return
	}
	_ = os.WriteFile(file, []byte(set.String()+"\n"), 0o644)
}

// reload is a daemon-reload: every unit's cgroup is realized again from
// its properties.
func (f *fakeSystemd) reload() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for unit := range f.allowed {
		f.realize(unit)
	}
}

// slowAuth makes PID 1 pause before each of its reads while authenticating.
func (f *fakeSystemd) slowAuth(pause time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.authPause = pause
}

// populate marks units whose cgroup holds processes.
func (f *fakeSystemd) populate(units ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.populated = map[string]bool{}
	for _, u := range units {
		f.populated[u] = true
	}
}

func (f *fakeSystemd) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}
