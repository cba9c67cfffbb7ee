// Package irqbalance talks to a running irqbalance through its control
// socket (the one irqbalance-ui uses): `setup` reports its sleep interval
// and the CPUs it is banned from, `settings cpus <cpulist>` bans CPUs and
// `settings cpus NULL` lifts a ban set that way, so irqbalance falls back to
// its environment (IRQBALANCE_BANNED_CPUS, IRQBALANCE_BANNED_CPULIST) or,
// without either, the kernel's isolated and nohz_full CPUs. It owns only the
// protocol, checked against irqbalance 1.9.2 (irqbalance.c: sock_handle,
// cputree.c: setup_banned_cpus); finding irqbalance is agent/facts' and the
// ban as a setting is agent/irq's.
//
// Everything irqbalance answers, and everything read from its /proc entry,
// is untrusted: answers are bounded, parsed strictly, and an answer that
// does not parse is an error naming what was wrong.
package irqbalance

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
)

// callTimeout bounds one exchange on the socket: irqbalance answers from its
// main loop, between two balancing passes.
var callTimeout = 3 * time.Second

// maxAnswer bounds what is read of an answer. `setup` is "SLEEP <n> ", one
// "IRQ <n> LOAD <n> DIFF <n> CLASS <n> " per IRQ banned by number, and
// "BANNED <mask>" (at most 512 bytes in irqbalance's own buffer).
const maxAnswer = 64 << 10

// maxCommand is irqbalance's receive buffer (500 bytes, one recvmsg): a
// longer command would be cut.
const maxCommand = 500

// Socket is the path of irqbalance pid's control socket as the host root
// reaches it: through the process's own root (<proc>/<pid>/root, where it
// bound it, even from a pod that has not mounted the host's /run), else the
// host's /run/irqbalance. "" when neither exists.
func Socket(root *host.Root, pid int) string {
	name := "irqbalance" + strconv.Itoa(pid) + ".sock"
	for _, p := range []string{
		root.Proc(strconv.Itoa(pid), "root", "run", "irqbalance", name),
		root.Path("run", "irqbalance", name),
	} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return p
		}
	}
	return ""
}

// Setup is what irqbalance's `setup` command reports.
type Setup struct {
	// Sleep is its balancing interval in seconds.
	Sleep int
	// Banned are the CPUs it places no IRQ on now: the ban set through the
	// socket, else its environment's, else the kernel's isolated and
	// nohz_full CPUs (plus thermal bans where built in). A new ban is taken
	// at its next balancing pass (up to Sleep seconds later).
	Banned cpuset.CPUSet
}

// ReadSetup asks irqbalance at sock for its setup.
func ReadSetup(sock string) (Setup, error) {
	ans, err := call(sock, "setup", true)
	if err != nil {
		return Setup{}, err
	}
	s, err := parseSetup(ans)
	if err != nil {
		return Setup{}, fmt.Errorf("irqbalance's setup answer on %s: %w", sock, err)
	}
	return s, nil
}

// parseSetup parses "SLEEP <n> [IRQ <n> LOAD <n> DIFF <n> CLASS <n> ]...
// BANNED <hex mask>".
func parseSetup(ans string) (Setup, error) {
	f := strings.Fields(ans)
	if len(f) < 4 || f[0] != "SLEEP" {
		return Setup{}, fmt.Errorf("want \"SLEEP <seconds> ... BANNED <mask>\", got %q", clip(ans))
	}
	sleep, err := strconv.Atoi(f[1])
	if err != nil || sleep < 1 || sleep > 1<<20 {
		return Setup{}, fmt.Errorf("SLEEP %q is not a number of seconds", clip(f[1]))
	}
	if f[len(f)-2] != "BANNED" {
		return Setup{}, fmt.Errorf("no BANNED <mask> at the end of %q", clip(ans))
	}
	mask := f[len(f)-1]
	if mask == "" || strings.Trim(mask, "0123456789abcdefABCDEF,") != "" {
		return Setup{}, fmt.Errorf("BANNED %q is not a CPU mask", clip(mask))
	}
	banned, err := cpulist.ParseMask(mask)
	if err != nil {
		return Setup{}, fmt.Errorf("BANNED: %w", err)
	}
	return Setup{Sleep: sleep, Banned: banned}, nil
}

// SetBanned sends `settings cpus <cpus>` to irqbalance at sock, or
// `settings cpus NULL` when cpus is empty: the ban set through the socket is
// lifted and irqbalance bans what its environment or the kernel says again.
// irqbalance takes it at its next balancing pass; Await waits for that.
func SetBanned(sock string, cpus cpuset.CPUSet) error {
	arg := "NULL"
	if !cpus.IsEmpty() {
		arg = cpus.String()
	}
	cmd := "settings cpus " + arg
	if len(cmd) >= maxCommand {
		return fmt.Errorf("the ban %s is too long for irqbalance's %d-byte command buffer", clip(arg), maxCommand)
	}
	_, err := call(sock, cmd, false)
	return err
}

// Await polls irqbalance at sock until it bans exactly want, for at most
// its balancing interval plus a margin (capped at max): a ban sent through
// the socket takes effect at irqbalance's next pass.
func Await(sock string, want cpuset.CPUSet, max time.Duration) (Setup, error) {
	s, err := ReadSetup(sock)
	if err != nil {
		return s, err
	}
	deadline := time.Now().Add(min(time.Duration(s.Sleep)*time.Second+2*time.Second, max))
	for !s.Banned.Equals(want) {
		if time.Now().After(deadline) {
			return s, fmt.Errorf("irqbalance still bans CPUs %q, not %q, after its balancing interval (%d s)", s.Banned.String(), want.String(), s.Sleep)
		}
		time.Sleep(100 * time.Millisecond)
		if s, err = ReadSetup(sock); err != nil {
			return s, err
		}
	}
	return s, nil
}

// call sends one command on a fresh connection, with the credentials
// irqbalance requires (SCM_CREDENTIALS of uid 0: it ignores any other
// sender), and reads the answer to EOF when answer is set.
func call(sock, cmd string, answer bool) (string, error) {
	conn, err := dial(sock)
	if err != nil {
		return "", fmt.Errorf("connecting to irqbalance's socket: %w", err)
	}
	defer conn.Close()
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return "", fmt.Errorf("%s is not a unix socket", sock)
	}
	_ = uc.SetDeadline(time.Now().Add(callTimeout))
	creds := unix.UnixCredentials(&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid())})
	if _, _, err := uc.WriteMsgUnix([]byte(cmd), creds, nil); err != nil {
		return "", fmt.Errorf("sending %q to irqbalance: %w", strings.Fields(cmd)[0], err)
	}
	if !answer {
		// irqbalance answers settings with nothing and closes: wait for the
		// close, so the command was read before the caller asks again.
		_, err := io.Copy(io.Discard, io.LimitReader(uc, maxAnswer))
		return "", wrapRead(cmd, err)
	}
	b, err := io.ReadAll(io.LimitReader(uc, maxAnswer+1))
	if err != nil {
		return "", wrapRead(cmd, err)
	}
	if len(b) > maxAnswer {
		return "", fmt.Errorf("irqbalance's answer to %q is longer than %d bytes", cmd, maxAnswer)
	}
	if len(b) == 0 {
		return "", fmt.Errorf("irqbalance answered %q with nothing (it answers only root)", cmd)
	}
	return string(b), nil
}

// dial connects to sock. A path too long for a socket address (108 bytes,
// under a deep host root) is reached through its directory's descriptor.
func dial(sock string) (net.Conn, error) {
	if len(sock) < 100 {
		return net.DialTimeout("unix", sock, callTimeout)
	}
	dir, err := os.OpenFile(filepath.Dir(sock), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return net.DialTimeout("unix", fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), filepath.Base(sock)), callTimeout)
}

func wrapRead(cmd string, err error) error {
	if err == nil || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("reading irqbalance's answer to %q: %w", cmd, err)
}

// clip shortens an untrusted string for an error message.
func clip(s string) string {
	const n = 80
	if len(s) > n {
		return strconv.Quote(s[:n]) + "…"
	}
	return strconv.Quote(s)
}

// EnvBan is the ban irqbalance 1.9 takes from its environment and the
// kernel when no ban was set through its socket (cputree.c:
// setup_banned_cpus): IRQBALANCE_BANNED_CPUS (a hex mask) when set and
// non-empty, else IRQBALANCE_BANNED_CPULIST, else the kernel's isolated and
// nohz_full CPUs. Thermal bans, where irqbalance is built with them, are not
// known here. environ is the process's (/proc/<pid>/environ, untrusted): a
// value that does not parse is an error.
func EnvBan(root *host.Root, environ []string) (cpuset.CPUSet, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	if v := env["IRQBALANCE_BANNED_CPUS"]; v != "" {
		s, err := cpulist.ParseMask(v)
		if err != nil {
			return cpuset.New(), fmt.Errorf("irqbalance's IRQBALANCE_BANNED_CPUS: %w", err)
		}
		return s, nil
	}
	if v := env["IRQBALANCE_BANNED_CPULIST"]; v != "" {
		s, err := cpulist.Parse(v)
		if err != nil {
			return cpuset.New(), fmt.Errorf("irqbalance's IRQBALANCE_BANNED_CPULIST: %w", err)
		}
		return s, nil
	}
	out := cpuset.New()
	for _, f := range []string{"isolated", "nohz_full"} {
		v, err := root.ReadString(root.Sys("devices", "system", "cpu", f))
		if err != nil {
			continue // absent without isolcpus or NO_HZ_FULL
		}
		v = strings.TrimSpace(v)
		if v == "(null)" {
			continue // the kernel prints (null) without nohz_full=
		}
		s, err := cpulist.Parse(v)
		if err != nil {
			return cpuset.New(), fmt.Errorf("the kernel's %s CPUs: %w", f, err)
		}
		out = out.Union(s)
	}
	return out, nil
}
