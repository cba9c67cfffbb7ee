package systemd

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
)

// authenticate runs the D-Bus handshake on c the way systemd's own clients
// (sd-bus, as systemctl uses it) do: AUTH EXTERNAL and BEGIN in one write,
// then the server's OK, and only after that the first message.
//
// godbus's handshake (Conn.Auth) goes in lockstep instead and sends BEGIN
// immediately followed by the first call. When PID 1 reads both at once (it
// reads up to 256 bytes per read while authenticating; under emulation it
// is slow enough to do so), sd-bus keeps the call in its read buffer past
// BEGIN, and its event loop, which only wakes for queued messages or a
// readable socket, never looks at it: the call is served only when the
// client gives up and closes (systemd 252, `make test-kernels`).
//
// The returned connection is godbus's, over a stream that answers godbus's
// own handshake locally (see handshaken) and is then c itself.
func authenticate(c net.Conn) (*dbus.Conn, error) {
	if err := c.SetDeadline(time.Now().Add(callTimeout)); err != nil {
		return nil, err
	}
	uid := strconv.Itoa(os.Geteuid())
	if _, err := io.WriteString(c, "\x00AUTH EXTERNAL "+hex.EncodeToString([]byte(uid))+"\r\nBEGIN\r\n"); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	ok, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(ok, "OK ") {
		return nil, fmt.Errorf("EXTERNAL authentication refused: %q", strings.TrimSpace(ok))
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	conn, err := dbus.NewConn(&handshaken{Conn: c, r: r, answers: []byte("REJECTED EXTERNAL\r\n" + ok)})
	if err != nil {
		return nil, err
	}
	if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(uid)}); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// handshaken is a connection whose authentication is already done, shaped
// for godbus, which insists on running its own: until godbus sends BEGIN,
// its writes are dropped and its reads get the server's answers it expects
// (answers); from then on it reads and writes the connection (reads go
// through r, which may hold bytes the server sent right after its OK).
type handshaken struct {
	net.Conn
	r       *bufio.Reader
	answers []byte
	sent    []byte // godbus's handshake so far
	begun   bool
}

func (h *handshaken) Read(p []byte) (int, error) {
	if len(h.answers) > 0 {
		n := copy(p, h.answers)
		h.answers = h.answers[n:]
		return n, nil
	}
	return h.r.Read(p)
}

func (h *handshaken) Write(p []byte) (int, error) {
	if h.begun {
		return h.Conn.Write(p)
	}
	h.sent = append(h.sent, p...)
	h.begun = bytes.HasSuffix(h.sent, []byte("BEGIN\r\n"))
	return len(p), nil
}
