package irqbalance

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/systemd"
)

// The fallback where irqbalance runs without its control socket: where
// systemd runs it as irqbalance.service, a runtime drop-in (under /run, so
// a reboot forgets it) sets IRQBALANCE_BANNED_CPULIST to what it banned
// before plus the CPUs asked for, and a daemon-reload and try-restart make
// irqbalance take it. The journal keeps the drop-in's absence; revert
// removes it and restarts irqbalance again. The drop-in is re-written only
// when it is changed or removed, never because irqbalance moved an IRQ.

// Unit is the systemd service that runs irqbalance.
const Unit = "irqbalance.service"

// dropInAddr is the drop-in knob's address.
const dropInAddr = "irqbalance:" + Unit + "/environment"

// IsDropInPath reports whether a knob or journal path names the drop-in.
func IsDropInPath(p string) bool { return p == dropInAddr }

// maxDropIn bounds what is read of the drop-in: the agent's own is a few
// hundred bytes.
const maxDropIn = 4 << 10

// restartMax bounds how long a write waits for irqbalance to come back
// with a new process after its restart (slow under emulation).
var restartMax = 60 * time.Second

// DropInAccess reaches the runtime drop-in that bans CPUs through
// irqbalance's environment; the journal records its entries as kind
// "irqbalance-env". The value is "" without the drop-in, else
// "<banned> (was <before>)", with "; unsets IRQBALANCE_BANNED_CPUS" when
// the drop-in unsets that older variable too (see dropIn). Writing renders
// the drop-in from the value (or removes it for ""), reloads systemd and
// restarts irqbalance if it runs. A read needs no running irqbalance, so
// revert works when it is gone.
var DropInAccess = &knob.Access{Name: "irqbalance-env", Claims: IsDropInPath,
	Read:  func(env knob.Env, path string) (string, error) { return readDropIn(env.Root, path) },
	Write: func(env knob.Env, path, value string) error { return writeDropIn(env.Root, path, value) },
}

// unitManager is what the fallback asks of the host's systemd; the
// tests replace it.
type unitManager interface {
	booted(root *host.Root) bool
	service(root *host.Root) (systemd.Service, error)
	reloadTryRestart(root *host.Root) (int, error)
}

type hostSystemd struct{}

func (hostSystemd) booted(root *host.Root) bool { return systemd.Booted(root) }
func (hostSystemd) service(root *host.Root) (systemd.Service, error) {
	return systemd.ReadService(root, Unit)
}
func (hostSystemd) reloadTryRestart(root *host.Root) (int, error) {
	return systemd.ReloadTryRestart(root, Unit, restartMax)
}

var units unitManager = hostSystemd{}

// dropInFile is the drop-in under the host root.
func dropInFile(root *host.Root) string {
	return root.Path("run", "systemd", "system", Unit+".d", "50-latencytier.conf")
}

// dropIn is the drop-in's content as the agent writes it.
type dropIn struct {
	// banned is what IRQBALANCE_BANNED_CPULIST says with it, before what
	// irqbalance banned without it (its environment's, else the kernel's
	// isolated and nohz_full CPUs), so a later pass asking for other CPUs
	// starts from there, not from its own earlier ban.
	banned, before cpuset.CPUSet
	// unsetMask: irqbalance's environment had IRQBALANCE_BANNED_CPUS,
	// which irqbalance 1.9 reads before the cpulist; its CPUs are in before.
	unsetMask bool
}

const unsetNote = "; unsets IRQBALANCE_BANNED_CPUS"

var valueForm = regexp.MustCompile(`^([0-9,-]+) \(was ([0-9,-]+|none)\)(` + regexp.QuoteMeta(unsetNote) + `)?$`)

// value is d's knob value.
func (d dropIn) value() string {
	before := d.before.String()
	if before == "" {
		before = "none"
	}
	v := d.banned.String() + " (was " + before + ")"
	if d.unsetMask {
		v += unsetNote
	}
	return v
}

// parseValue parses a knob value (a journal's, untrusted).
func parseValue(v string) (dropIn, error) {
	m := valueForm.FindStringSubmatch(v)
	if m == nil {
		return dropIn{}, fmt.Errorf("irqbalance's drop-in value %s: want \"<cpulist> (was <cpulist>|none)\"", clip(v))
	}
	var d dropIn
	var err error
	if d.banned, err = cpulist.Parse(m[1]); err != nil || d.banned.IsEmpty() {
		return dropIn{}, fmt.Errorf("irqbalance's drop-in value: banned CPUs %s: %v", clip(m[1]), err)
	}
	if m[2] != "none" {
		if d.before, err = cpulist.Parse(m[2]); err != nil {
			return dropIn{}, fmt.Errorf("irqbalance's drop-in value: CPUs banned before %s: %w", clip(m[2]), err)
		}
	}
	d.unsetMask = m[3] != ""
	return d, nil
}

const (
	dropInHead   = "# Written by the latencytier agent: irqbalance runs here without its control\n# socket, so it is banned from the isolated CPUs through its environment.\n# Volatile (/run): a reboot forgets it; the agent's revert removes it and\n# restarts irqbalance.\n"
	valuePrefix  = "# latencytier-value: "
	cpulistEnv   = "IRQBALANCE_BANNED_CPULIST"
	cpumaskEnv   = "IRQBALANCE_BANNED_CPUS"
	environmentK = "Environment="
)

// render is the drop-in file of d. Its value line is what a read returns.
func (d dropIn) render() string {
	var b strings.Builder
	b.WriteString(dropInHead)
	b.WriteString(valuePrefix + d.value() + "\n")
	b.WriteString("[Service]\n")
	b.WriteString(environmentK + cpulistEnv + "=" + d.banned.String() + "\n")
	if d.unsetMask {
		b.WriteString("UnsetEnvironment=" + cpumaskEnv + "\n")
	}
	return b.String()
}

// parseDropIn parses the drop-in file (untrusted): it is the agent's
// only when it is exactly what render makes of the value it records.
func parseDropIn(content string) (dropIn, error) {
	first, _, _ := strings.Cut(strings.TrimPrefix(content, dropInHead), "\n")
	v, ok := strings.CutPrefix(first, valuePrefix)
	if !ok || !strings.HasPrefix(content, dropInHead) {
		return dropIn{}, errors.New("not written by the latencytier agent")
	}
	d, err := parseValue(v)
	if err != nil {
		return dropIn{}, err
	}
	if d.render() != content {
		return dropIn{}, errors.New("changed since the latencytier agent wrote it")
	}
	return d, nil
}

// loadDropIn reads the drop-in: ok false without one, an error for one
// the agent did not write (or that was edited), naming the file.
func loadDropIn(root *host.Root) (d dropIn, ok bool, err error) {
	path := dropInFile(root)
	f, err := root.OpenOwn(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return dropIn{}, false, nil
	}
	if err != nil {
		return dropIn{}, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDropIn+1))
	if err != nil {
		return dropIn{}, false, err
	}
	if len(b) > maxDropIn {
		return dropIn{}, false, fmt.Errorf("%s: longer than %d bytes, not the agent's", hostPath(root, path), maxDropIn)
	}
	if d, err = parseDropIn(string(b)); err != nil {
		return dropIn{}, false, fmt.Errorf("%s: %w", hostPath(root, path), err)
	}
	return d, true, nil
}

// hostPath is path as the host names it.
func hostPath(root *host.Root, path string) string {
	return filepath.Join("/", strings.TrimPrefix(path, root.Path()))
}

func readDropIn(root *host.Root, path string) (string, error) {
	if !IsDropInPath(path) {
		return "", fmt.Errorf("not irqbalance's drop-in: %q", path)
	}
	d, ok, err := loadDropIn(root)
	if err != nil {
		// Someone else's file at the agent's path, or one edited by hand:
		// never overwritten, as revert could not put it back.
		return "", fmt.Errorf("%w; remove it, and the agent writes its own", err)
	}
	if !ok {
		return "", nil
	}
	return d.value(), nil
}

// writeDropIn renders value's drop-in (removes it for ""), then reloads
// systemd and restarts irqbalance, and checks that the restarted
// irqbalance bans what the drop-in says.
func writeDropIn(root *host.Root, path, value string) error {
	if !IsDropInPath(path) {
		return fmt.Errorf("not irqbalance's drop-in: %q", path)
	}
	file := dropInFile(root)
	var want dropIn
	if value == "" {
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	} else {
		var err error
		if want, err = parseValue(value); err != nil {
			return err
		}
		if err := writeAtomic(root, file, want.render()); err != nil {
			return err
		}
	}
	pid, err := units.reloadTryRestart(root)
	if err != nil {
		return fmt.Errorf("restarting %s to take %s: %w", Unit, hostPath(root, file), err)
	}
	if value == "" || pid == 0 {
		return nil // removed, or irqbalance does not run: it takes it when it starts
	}
	got, err := awaitEnvBan(root, pid, want.banned)
	if err != nil {
		return fmt.Errorf("irqbalance (pid %d) restarted with %s: %w", pid, hostPath(root, file), err)
	}
	if !got.Equals(want.banned) {
		return fmt.Errorf("irqbalance (pid %d) restarted with %s bans CPUs %q from its environment, not %q: an EnvironmentFile= of %s sets %s, which overrides Environment=; ban the CPUs there",
			pid, hostPath(root, file), got.String(), want.banned.String(), Unit, cpulistEnv)
	}
	return nil
}

// envSettle bounds how long a restarted irqbalance's environment may
// read as not yet its own: systemd knows its main pid from the fork,
// before the exec gives the process the unit's environment.
var envSettle = 5 * time.Second

// awaitEnvBan is the ban in process pid's environment once it is want, or
// what it is when envSettle has passed.
func awaitEnvBan(root *host.Root, pid int, want cpuset.CPUSet) (cpuset.CPUSet, error) {
	deadline := time.Now().Add(envSettle)
	for {
		got, err := EnvBan(root, environ(root, pid))
		if (err == nil && got.Equals(want)) || time.Now().After(deadline) {
			return got, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeAtomic writes content as file (a temp file renamed over it, never
// through a symlink), creating the drop-in directory.
func writeAtomic(root *host.Root, file, content string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	tmp := file + ".tmp"
	_ = os.Remove(tmp)
	f, err := root.OpenOwn(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(content)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, file)
	}
	if werr != nil {
		_ = os.Remove(tmp)
	}
	return werr
}

// fallback is what Find knows of an irqbalance the socket cannot reach.
type fallback struct {
	pid int
	// socket: it has its control socket.
	socket bool
	// own is the agent's drop-in (ok), or why the file there is not
	// (ownErr); neither without a file.
	own    dropIn
	ok     bool
	ownErr error
	booted bool
	svc    systemd.Service
	svcErr error
	// environ is the process's environment.
	environ []string
}

// readFallback reads what decide needs, asking systemd only when there is
// no socket or the drop-in is there.
func readFallback(root *host.Root, pid int) fallback {
	fb := fallback{pid: pid, socket: Socket(root, pid) != ""}
	fb.own, fb.ok, fb.ownErr = loadDropIn(root)
	if fb.socket && !fb.ok && fb.ownErr == nil {
		return fb
	}
	if fb.booted = units.booted(root); fb.booted {
		fb.svc, fb.svcErr = units.service(root)
	}
	fb.environ = environ(root, pid)
	return fb
}

// decide is the fallback's decision: the drop-in knob that bans cpus, or
// nil and why not ("" where the socket serves). The socket is preferred;
// a drop-in of the agent's stays in use while it is there, even once a
// socket appears (a restart may bring irqbalance's run directory back), so
// the two never take turns.
func (fb fallback) decide(root *host.Root, cpus cpuset.CPUSet) (*knob.Knob, string) {
	if fb.socket && !fb.ok && fb.ownErr == nil {
		return nil, ""
	}
	switch {
	case !fb.booted:
		return nil, "the host's init is not systemd, so there is no " + Unit + " to give a runtime drop-in"
	case errors.Is(fb.svcErr, fs.ErrNotExist) || (fb.svcErr == nil && fb.svc.LoadState != "loaded"):
		return nil, "systemd has no " + Unit + " loaded"
	case fb.svcErr != nil:
		return nil, "reading " + Unit + " from systemd: " + fb.svcErr.Error()
	case fb.svc.MainPID != fb.pid:
		return nil, fmt.Sprintf("%s's main process is pid %d, not irqbalance's pid %d", Unit, fb.svc.MainPID, fb.pid)
	}
	k := &knob.Knob{ID: BanID, Path: dropInAddr, Access: DropInAccess,
		Label: fmt.Sprintf("%s's banned CPUs (runtime drop-in)", Unit)}
	want := dropIn{}
	if fb.ok {
		want.before, want.unsetMask = fb.own.before, fb.own.unsetMask
	} else {
		env := envMap(fb.environ)
		if v := env[cpulistEnv]; v != "" && envMap(fb.svc.Environment)[cpulistEnv] != v {
			return nil, fmt.Sprintf("irqbalance's %s=%s comes from an EnvironmentFile= of %s (Debian: /etc/default/irqbalance), which overrides the Environment= of a drop-in", cpulistEnv, clip(v), Unit)
		}
		before, err := EnvBan(root, fb.environ)
		if err != nil {
			return nil, err.Error()
		}
		// systemd still has a drop-in of the agent's loaded that is gone:
		// irqbalance's environment holds the agent's ban, which is then all
		// that is known of what it banned before (revert, which removes the
		// drop-in, still restores exactly).
		loaded := slices.Contains(fb.svc.DropInPaths, hostPath(root, dropInFile(root)))
		if cpus.IsSubsetOf(before) && !loaded {
			// Banned already: nothing to write, and no drop-in to hold.
			k.Note = fmt.Sprintf("irqbalance (pid %d) bans CPUs %s from its environment or the kernel's isolated and nohz_full CPUs", fb.pid, before)
			return k, ""
		}
		want.before, want.unsetMask = before, env[cpumaskEnv] != ""
	}
	want.banned = want.before.Union(cpus)
	k.Desired = want.value()
	k.Note = fmt.Sprintf("banned through %s's environment (runtime drop-in %s, restarted irqbalance): CPUs %s",
		Unit, hostPath(root, dropInFile(root)), want.banned)
	return k, ""
}

// envMap is environ as a map; a later assignment wins.
func envMap(environ []string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// dropInKnob renders the drop-in knob for cpus where the fallback is the
// way, else returns why not ("" where the socket serves).
func dropInKnob(root *host.Root, pid int, cpus cpuset.CPUSet) (*knob.Knob, string) {
	return readFallback(root, pid).decide(root, cpus)
}
