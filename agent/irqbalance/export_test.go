package irqbalance

import (
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/systemd"
	"testing"
	"time"

	"k8s.io/utils/cpuset"
)

// Fake is a fake irqbalance control socket for the external tests.
type Fake = fakeDaemon

// ServeFake serves a fake irqbalance on path that bans banned, falls back
// to envBan on NULL, and takes a new ban one setup later.
func ServeFake(t *testing.T, path string, banned, envBan cpuset.CPUSet) *Fake {
	d := &fakeDaemon{sleep: 1, banned: banned, envBan: envBan, lag: 1}
	serve(t, d, path)
	return d
}

// Commands are the commands d was sent, setups left out.
func (d *fakeDaemon) Commands() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, c := range d.commands {
		if c != "setup" {
			out = append(out, c)
		}
	}
	return out
}

// ShortAwait bounds writes' wait for the test.
func ShortAwait(t *testing.T) {
	old := awaitMax
	awaitMax = 3 * time.Second
	t.Cleanup(func() { awaitMax = old })
}

// FakeUnits stands in for the host's systemd in a test.
type FakeUnits struct {
	Booted  bool
	Service func() (systemd.Service, error)
	// Restart is a daemon-reload and try-restart: the new main pid.
	Restart func() (int, error)
}

func (u *FakeUnits) booted(*host.Root) bool                      { return u.Booted }
func (u *FakeUnits) service(*host.Root) (systemd.Service, error) { return u.Service() }
func (u *FakeUnits) reloadTryRestart(*host.Root) (int, error)    { return u.Restart() }

// UseUnits makes the fallback ask u instead of the host's systemd.
func UseUnits(t *testing.T, u *FakeUnits) {
	old := units
	units = u
	t.Cleanup(func() { units = old })
}

// DropInFile is the drop-in's path under root.
var DropInFile = dropInFile
