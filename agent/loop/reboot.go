package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/systemd"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Managed reboots, the agent's side: the record of the reboot it asked for
// (reboot.json in its state directory) and the pure decision whether to
// reboot now, wait, or report the reboot failed.

// BootOptions are the agent's side of managed reboots.
type BootOptions struct {
	// Reboot reboots the host; nil: systemd.Reboot (reboot.target over
	// the host's systemd, never sysrq).
	Reboot func(ctx context.Context) error
	// FailAfter is how long after a reboot request an unchanged boot id is
	// reported Failed; <= 0: DefaultRebootFailAfter.
	FailAfter time.Duration
	// SlotsFile is the cluster admin's number of reboot slots (key slots
	// of ConfigMap latencytier-reboots, mounted), read before every
	// managed reboot; "" or missing: no slot, no reboot (guard.go).
	SlotsFile string
	// SlotsNamespace holds the reboot slots (Leases): the operator
	// namespace, the agent pod's own.
	SlotsNamespace string
}

// DefaultRebootFailAfter is how long a requested reboot may take to show a
// new boot id before the agent reports it Failed (the manager's bootTimeout
// is what pauses the rollout).
const DefaultRebootFailAfter = 10 * time.Minute

// rebootFile is the agent's record of the managed reboot it asked for, in
// its state directory on the host (it must outlive the boot it ends).
const rebootFile = "reboot.json"

// rebootRecord says "rebooting for Revision from boot FromBoot", written
// (and synced) before the agent asks systemd, so a crash or restart between
// the two never asks again for the same revision.
type rebootRecord struct {
	Revision    string    `json:"revision"`
	FromBoot    string    `json:"fromBoot"`
	RequestedAt time.Time `json:"requestedAt"`
	// Done is the revision of the managed reboot before this one that
	// happened (status.boot.rebootedFor while this one is pending).
	Done string `json:"done,omitempty"`
	// Slot is the reboot slot (Lease) the agent took for this reboot and
	// has not given back yet (guard.go).
	Slot string `json:"slot,omitempty"`
}

func loadRebootRecord(root *host.Root) (*rebootRecord, error) {
	if _, exists, err := root.CheckStateDir(); err != nil || !exists {
		return nil, err
	}
	b, err := root.ReadOwn(filepath.Join(root.StateDir(), rebootFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the reboot record: %w", err)
	}
	var rec rebootRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Revision == "" || rec.FromBoot == "" {
		return nil, fmt.Errorf("reboot record %s does not parse (%v): the agent asks for no reboot until it is removed", filepath.Join(root.StateDir(), rebootFile), err)
	}
	return &rec, nil
}

// saveRebootRecord writes rec atomically and durably (temp file, fsync,
// rename, fsync of the directory).
func saveRebootRecord(root *host.Root, rec rebootRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := root.WriteOwn(rebootFile, b); err != nil {
		return fmt.Errorf("write the reboot record: %w", err)
	}
	return nil
}

// rebootDecision is what one pass does about a managed reboot.
type rebootDecision struct {
	// Reboot: write Record, then ask systemd.
	Reboot bool
	Record rebootRecord
	// RebootedFor is status.boot.rebootedFor.
	RebootedFor string
	// Failed says why a requested reboot is overdue ("" when it is not).
	Failed string
}

// decideReboot is the pure reboot rule. The agent reboots for spec's
// revision when the manager asks (phase Rebooting), the bootloader holds
// arguments the running kernel lacks (state Staged) or the running kernel
// holds arguments the agent took out of it (Unstaged), the node has not
// booted since the manager asked (spec.bootID) and the agent has never
// asked for this revision (rec). A request whose boot id is unchanged after
// failAfter is reported Failed, never asked again.
func decideReboot(spec *v1alpha1.NodeRebootSpec, state v1alpha1.BootState, bootID string, rec *rebootRecord, now time.Time, failAfter time.Duration) rebootDecision {
	var d rebootDecision
	if rec != nil {
		d.RebootedFor = rec.Done
		if rec.FromBoot != bootID {
			d.RebootedFor = rec.Revision
		}
	}
	if spec == nil || spec.Phase != v1alpha1.RebootRequested {
		return d
	}
	if rec != nil && rec.Revision == spec.Revision {
		if rec.FromBoot == bootID && now.Sub(rec.RequestedAt) >= failAfter {
			d.Failed = fmt.Sprintf("the agent asked systemd to reboot for %s at %s and the node still runs boot %s",
				spec.Revision, rec.RequestedAt.UTC().Format(time.RFC3339), bootID)
		}
		return d
	}
	if (spec.BootID != "" && spec.BootID != bootID) || !rebootTakes(state) || bootID == "" {
		return d
	}
	d.Reboot = true
	d.Record = rebootRecord{Revision: spec.Revision, FromBoot: bootID, RequestedAt: now.UTC(), Done: d.RebootedFor}
	return d
}

// rebootTakes: a reboot changes the kernel's arguments in state.
func rebootTakes(state v1alpha1.BootState) bool {
	return state == v1alpha1.BootStaged || state == v1alpha1.BootUnstaged
}

func (r *Reconciler) failAfter() time.Duration {
	if r.Boot.FailAfter <= 0 {
		return DefaultRebootFailAfter
	}
	return r.Boot.FailAfter
}

func (r *Reconciler) rebootHost(ctx context.Context) error {
	if r.Boot.Reboot != nil {
		return r.Boot.Reboot(ctx)
	}
	return systemd.Reboot(ctx, r.Root)
}
