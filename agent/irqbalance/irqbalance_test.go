package irqbalance

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/internal/testroot"
)

// fakeDaemon answers like irqbalance 1.9.2's sock_handle: one message per
// connection, ignored unless it carries SCM_CREDENTIALS of uid 0; `setup`
// answers "SLEEP n BANNED <mask>", `settings cpus X` sets the ban taken at
// the next pass (here: the next `setup` after lag more).
type fakeDaemon struct {
	mu       sync.Mutex
	sleep    int
	banned   cpuset.CPUSet // what setup reports
	envBan   cpuset.CPUSet // what NULL falls back to
	pending  *cpuset.CPUSet
	lag      int // setups answered before a pending ban is taken
	commands []string
	noCreds  int // messages dropped for lack of root credentials
	answer   string
}

func serve(t *testing.T, d *fakeDaemon, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 1) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				return
			}
			d.handle(c)
		}
	}()
}

func (d *fakeDaemon) handle(c *net.UnixConn) {
	defer c.Close()
	buf, oob := make([]byte, 500), make([]byte, 128)
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	root := false
	for _, m := range msgs {
		if cr, err := unix.ParseUnixCredentials(&m); err == nil && cr.Uid == 0 {
			root = true
		}
	}
	if !root {
		d.noCreds++
		return
	}
	cmd := string(buf[:n])
	d.commands = append(d.commands, cmd)
	switch {
	case cmd == "setup":
		if d.pending != nil {
			if d.lag > 0 {
				d.lag--
			} else {
				d.banned, d.pending = *d.pending, nil
			}
		}
		a := d.answer
		if a == "" {
			a = "SLEEP " + itoa(d.sleep) + " BANNED " + mask(d.banned)
		}
		_, _ = c.Write([]byte(a))
	case strings.HasPrefix(cmd, "settings cpus "):
		arg := strings.Fields(strings.TrimPrefix(cmd, "settings cpus "))[0]
		set := d.envBan
		if arg != "NULL" {
			set, _ = cpuset.Parse(arg)
		}
		d.pending = &set
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// mask prints a set the way irqbalance's cpumask_scnprintf does: 8-digit
// hex groups, leading zero groups left out, the last always printed.
func mask(s cpuset.CPUSet) string {
	var w [4]uint32
	for _, c := range s.List() {
		w[c/32] |= 1 << (c % 32)
	}
	var parts []string
	for i := 3; i >= 0; i-- {
		if w[i] != 0 || len(parts) > 0 || i == 0 {
			parts = append(parts, strings.ToLower(hex8(w[i])))
		}
	}
	return strings.Join(parts, ",")
}

func hex8(v uint32) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return string(b)
}

func sockPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "irqbalance42.sock")
}

func TestReadSetupAndSetBanned(t *testing.T) {
	d := &fakeDaemon{sleep: 1, banned: cpuset.New(3), envBan: cpuset.New(3)}
	sock := sockPath(t)
	serve(t, d, sock)
	s, err := ReadSetup(sock)
	if err != nil || s.Sleep != 1 || !s.Banned.Equals(cpuset.New(3)) {
		t.Fatalf("ReadSetup = %+v, %v; want sleep 1, banned 3", s, err)
	}
	d.lag = 2 // the ban is taken two setups later: Await must poll
	if err := SetBanned(sock, cpuset.New(1, 2, 3, 40)); err != nil {
		t.Fatal(err)
	}
	if s, err = Await(sock, cpuset.New(1, 2, 3, 40), 5*time.Second); err != nil || !s.Banned.Equals(cpuset.New(1, 2, 3, 40)) {
		t.Fatalf("Await = %+v, %v", s, err)
	}
	if err := SetBanned(sock, cpuset.New()); err != nil {
		t.Fatal(err)
	}
	if _, err := Await(sock, cpuset.New(3), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var sent []string
	for _, c := range d.commands {
		if c != "setup" {
			sent = append(sent, c)
		}
	}
	if want := []string{"settings cpus 1-3,40", "settings cpus NULL"}; strings.Join(sent, "|") != strings.Join(want, "|") {
		t.Errorf("commands = %q, want %q", sent, want)
	}
	if d.noCreds != 0 {
		t.Errorf("%d messages without root credentials", d.noCreds)
	}
}

// A ban irqbalance never takes is an error naming both sets, after its
// interval, not a wait forever.
func TestAwaitGivesUp(t *testing.T) {
	d := &fakeDaemon{sleep: 1, banned: cpuset.New(), lag: 1 << 30}
	sock := sockPath(t)
	serve(t, d, sock)
	if err := SetBanned(sock, cpuset.New(1)); err != nil {
		t.Fatal(err)
	}
	_, err := Await(sock, cpuset.New(1), 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), `still bans CPUs "", not "1"`) {
		t.Fatalf("Await = %v, want an error naming both bans", err)
	}
}

// Answers are untrusted: anything but SLEEP n ... BANNED <hex mask> is an
// error saying what was wrong.
func TestParseSetup(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // cpulist, or "error: <substring>"
	}{
		{"SLEEP 10 BANNED 00000000", ""},
		{"SLEEP 10 BANNED 0000000c\n", "2-3"},
		{"SLEEP 10 IRQ 24 LOAD 3 DIFF 1 CLASS 2 BANNED 00000001,00000002", "1,32"},
		{"", "error: want"},
		{"HELLO 1 BANNED 0", "error: want"},
		{"SLEEP x BANNED 0", "error: not a number"},
		{"SLEEP 0 BANNED 0", "error: not a number"},
		{"SLEEP 10 BANNED 0x3", "error: not a CPU mask"},
		{"SLEEP 10 BANNED -3", "error: not a CPU mask"},
		{"SLEEP 10 BANNED", "error: want"},
		{"SLEEP 10 IRQ 3 BANNED 1 extra", "error: no BANNED"},
	} {
		s, err := parseSetup(tc.in)
		if sub, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
			if err == nil || !strings.Contains(err.Error(), sub) {
				t.Errorf("parseSetup(%q) = %v, %v; want error with %q", tc.in, s, err, sub)
			}
			continue
		}
		if err != nil || s.Banned.String() != tc.want {
			t.Errorf("parseSetup(%q) = %q, %v; want %q", tc.in, s.Banned.String(), err, tc.want)
		}
	}
}

// A socket path too long for a socket address (a deep host root) is still
// reached.
func TestLongSocketPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{sleep: 2, banned: cpuset.New(5)}
	short := filepath.Join(t.TempDir(), "s.sock")
	serve(t, d, short)
	long := filepath.Join(dir, "irqbalance42.sock")
	if err := os.Rename(short, long); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadSetup(long); err != nil || !s.Banned.Equals(cpuset.New(5)) {
		t.Fatalf("ReadSetup(%d-byte path) = %+v, %v", len(long), s, err)
	}
}

// The ban without one set through the socket, as irqbalance 1.9.2 computes
// it: IRQBALANCE_BANNED_CPUS first, then IRQBALANCE_BANNED_CPULIST, then the
// kernel's isolated and nohz_full CPUs; malformed values are errors.
func TestEnvBan(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"sys/devices/system/cpu/isolated":  "2-3\n",
		"sys/devices/system/cpu/nohz_full": "(null)\n",
	})
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, "2-3"},
		{[]string{"IRQBALANCE_BANNED_CPULIST=", "PATH=/bin"}, "2-3"},
		{[]string{"IRQBALANCE_BANNED_CPULIST=5-6"}, "5-6"},
		{[]string{"IRQBALANCE_BANNED_CPULIST=5-6", "IRQBALANCE_BANNED_CPUS=3"}, "0-1"},
		{[]string{"IRQBALANCE_BANNED_CPULIST=5-x"}, "error: IRQBALANCE_BANNED_CPULIST"},
		{[]string{"IRQBALANCE_BANNED_CPUS=zz"}, "error: IRQBALANCE_BANNED_CPUS"},
	} {
		got, err := EnvBan(root, tc.env)
		if sub, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
			if err == nil || !strings.Contains(err.Error(), sub) {
				t.Errorf("EnvBan(%q) = %v, %v; want error with %q", tc.env, got, err, sub)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("EnvBan(%q) = %q, %v; want %q", tc.env, got.String(), err, tc.want)
		}
	}
}

// The ban keeps what irqbalance bans already (its environment's, an
// administrator's through the socket) and adds the CPUs asked for; when it
// bans them already, nothing is sent and the setting's message says why.
func TestBanValue(t *testing.T) {
	for _, tc := range []struct {
		name           string
		banned, envBan cpuset.CPUSet
		envErr         error
		cpus           cpuset.CPUSet
		want, note     string
	}{
		{"nothing banned", cpuset.New(), cpuset.New(), nil, cpuset.New(2, 3), "2-3", "banned through irqbalance's socket (pid 7): CPUs 2-3"},
		{"environment bans one", cpuset.New(5), cpuset.New(5), nil, cpuset.New(2, 3), "2-3,5", "banned through irqbalance's socket (pid 7): CPUs 2-3,5"},
		{"an administrator's ban stays", cpuset.New(6), cpuset.New(), nil, cpuset.New(2), "2,6", "banned through irqbalance's socket (pid 7): CPUs 2,6"},
		{"isolcpus covers them", cpuset.New(2, 3), cpuset.New(2, 3), nil, cpuset.New(2, 3), "", "irqbalance (pid 7) bans CPUs 2-3 from its environment"},
		{"our own ban, next pass", cpuset.New(2, 3), cpuset.New(), nil, cpuset.New(2, 3), "2-3", "banned through irqbalance's socket (pid 7): CPUs 2-3"},
		{"environment unreadable", cpuset.New(2, 3), cpuset.New(), os.ErrInvalid, cpuset.New(2), "2-3", "banned through"},
	} {
		d := daemon{pid: 7, setup: Setup{Sleep: 10, Banned: tc.banned}, envBan: tc.envBan, envErr: tc.envErr}
		got, note := d.ban(tc.cpus)
		if got != tc.want || !strings.HasPrefix(note, tc.note) {
			t.Errorf("%s: ban = %q, %q; want %q, %q…", tc.name, got, note, tc.want, tc.note)
		}
	}
}
