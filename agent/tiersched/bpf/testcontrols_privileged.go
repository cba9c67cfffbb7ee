//go:build privileged

package bpf

import (
	"fmt"
	"math"
)

// This file exists only in builds with the privileged tag, which only test
// binaries use (`go test -tags privileged`; the agent binary is built
// without tags, and TestAgentBinaryHasNoTestControls holds that): the
// agent has no path to the stall control.

// WithTestControls arms the test-only stall control: a task of the tgid
// set by Maps.Stall is never queued, so the kernel's watchdog ejects the
// scheduler after o.Timeout.
func WithTestControls(o Options) Options {
	o.testControls = true
	return o
}

// Stall makes the scheduler drop every task of tgid pid (0: none); it
// acts only on a scheduler loaded WithTestControls.
func (m *Maps) Stall(pid int) error {
	v := uint32(0)
	if pid != 0 {
		var err error
		if v, err = checkTgid(pid); err != nil {
			return err
		}
	}
	return m.stall.Put(uint32(0), v)
}

func checkTgid(pid int) (uint32, error) {
	if pid <= 0 || pid > math.MaxInt32 {
		return 0, fmt.Errorf("pid %d out of range", pid)
	}
	return uint32(pid), nil
}
