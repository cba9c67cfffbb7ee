// Package irq steers hardware interrupts to the reserved (housekeeping) CPUs:
// every IRQ's smp_affinity_list and /proc/irq/default_smp_affinity. Managed
// and per-CPU IRQs refuse new affinity (EIO, sometimes EPERM/EACCES); their
// knobs are marked so the refusal is reported Immovable with the IRQ's number
// and name, never as a node failure. The kernel's effective_affinity_list is
// read back to verify each move. IRQs that appear later are caught on the
// next pass because every pass lists /proc/irq afresh.
//
// Where irqbalance runs, it is banned from every online CPU outside the
// reserved ones through its control socket (agent/irqbalance; the ban comes
// first in the knobs), and an IRQ it moves within the reserved CPUs is
// its placement, not drift: only an IRQ found on another CPU is steered
// back (irqbalance ignoring its ban, or another writer).
package irq

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/irqbalance"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/settingid"
)

// defaultID is the setting name of /proc/irq/default_smp_affinity.
var defaultID = settingid.IRQ.ID("default_smp_affinity")

// ID is the setting name of one IRQ.
func ID(n int) string { return settingid.IRQ.ID(strconv.Itoa(n)) }

// Knobs returns irqbalance's ban when it runs, then default_smp_affinity,
// then every numbered IRQ, ascending, each steered to reserved.
func Knobs(root *host.Root, reserved cpuset.CPUSet) ([]knob.Knob, error) {
	if reserved.IsEmpty() {
		return nil, fmt.Errorf("irq: reserved CPU set is empty")
	}
	var knobs []knob.Knob
	equal, note := cpulist.Equal, ""
	if ib := balancer(root, reserved); ib.PID != 0 {
		if ib.Ban != nil {
			knobs = append(knobs, *ib.Ban)
		}
		// irqbalance places each IRQ on some of the CPUs it may use:
		// within the reserved ones is where it belongs.
		equal = effectiveWithin
		note = fmt.Sprintf("%s (pid %d) within the reserved CPUs", placedNote, ib.PID)
	}
	def := root.Proc("irq", "default_smp_affinity")
	if root.Exists(def) {
		knobs = append(knobs, knob.Knob{ID: defaultID, Path: def, Desired: cpulist.FormatMask(reserved),
			Equal: cpulist.MasksEqual, Label: "default_smp_affinity"})
	}
	irqs, err := list(root)
	if err != nil {
		return nil, err
	}
	names := names(root)
	for _, n := range irqs {
		dir := root.Proc("irq", strconv.Itoa(n))
		k := knob.Knob{
			ID:                 ID(n),
			Path:               dir + "/smp_affinity_list",
			Desired:            reserved.String(),
			Equal:              equal,
			Label:              label(n, names[n]),
			RefusalIsImmovable: true,
			Note:               note,
		}
		if root.Exists(dir + "/effective_affinity_list") {
			k.VerifyPath = dir + "/effective_affinity_list"
			k.VerifyMatches = effectiveWithin
		}
		knobs = append(knobs, k)
	}
	return knobs, nil
}

func label(n int, name string) string {
	if name == "" {
		return fmt.Sprintf("IRQ %d", n)
	}
	return fmt.Sprintf("IRQ %d (%s)", n, name)
}

// list returns the numbered IRQs under /proc/irq that have an
// smp_affinity_list, ascending.
func list(root *host.Root) ([]int, error) {
	entries, err := root.ReadDir(root.Proc("irq"))
	if err != nil {
		return nil, fmt.Errorf("irq: list %s: %w", root.Proc("irq"), err)
	}
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		if root.Exists(root.Proc("irq", e.Name(), "smp_affinity_list")) {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out, nil
}

// names maps IRQ numbers to their device names from /proc/interrupts. A
// missing or unreadable file yields an empty map: names are decoration.
func names(root *host.Root) map[int]string {
	out := map[int]string{}
	fs, err := procfs.NewFS(root.Proc())
	if err != nil {
		return out
	}
	p, err := fs.Proc(1)
	if err != nil {
		return out
	}
	intr, err := p.Interrupts()
	if err != nil {
		return out
	}
	for k, v := range intr {
		n, err := strconv.Atoi(k)
		if err != nil {
			continue
		}
		fields := strings.Fields(v.Devices)
		if len(fields) > 0 {
			out[n] = fields[len(fields)-1]
		}
	}
	return out
}

// effectiveWithin accepts an effective affinity that is a non-empty subset of
// the requested list: the kernel delivers to one CPU of the set.
func effectiveWithin(effective, want string) bool {
	e, err1 := cpulist.Parse(strings.TrimSpace(effective))
	w, err2 := cpulist.Parse(strings.TrimSpace(want))
	return err1 == nil && err2 == nil && !e.IsEmpty() && e.IsSubsetOf(w)
}

// placedNote starts the message of an IRQ irqbalance placed.
const placedNote = "placed by irqbalance"

// PlacedByIRQBalance reports whether a result is an IRQ's that irqbalance
// placed within the reserved CPUs: which of them it picked this pass is
// its business, so status need not show it (nor change when it does).
func PlacedByIRQBalance(r v1alpha1.SettingResult) bool {
	_, ok := Number(r.Setting)
	return ok && r.State == v1alpha1.SettingApplied && strings.HasPrefix(r.Message, placedNote)
}

// balancer finds a running irqbalance and renders its ban of every online
// CPU outside reserved. Online CPUs unknown: no ban, and the IRQs are still
// taken as irqbalance's within reserved.
func balancer(root *host.Root, reserved cpuset.CPUSet) irqbalance.Running {
	online, err := cpulist.Online(root)
	if err != nil {
		online = reserved
	}
	return irqbalance.Find(root, online.Difference(reserved))
}
