package loop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/agent/internal/bound"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// The node is the last guard of its own reboot. Whatever its LatencyNode
// says, the agent reboots for a managed reboot only while both hold:
//
//   - its Node is cordoned (spec.unschedulable) with the manager's marker,
//     annotation latencytier.io/reboot-cordon naming the revision the
//     request is for (the manager sets both in one patch, after it has
//     written the request's record, and drains the node);
//   - it holds one of the reboot slots, Leases latencytier-reboot-slot-<i>
//     (i below the cluster admin's number of slots, ConfigMap
//     latencytier-reboots mounted into the pod) in the operator namespace,
//     with holderIdentity its node.
//
// Otherwise nothing happens: no reboot record, no reboot; a Warning event
// RebootRefused on the LatencyNode and status.boot's message say what was
// missing. The admission policies hold the slots to the same rules (only an
// agent takes one, for its own node, below the admin's number), so a
// stolen manager token reboots at most as many nodes at once as the admin
// allows, and only nodes it cordoned (and drained, or at least emptied of
// new work). The agent gives its slot back once it booted anew, or once a
// request taken back can no longer reboot it.

// Reboot slots.
const (
	// SlotLeasePrefix names the slots: SlotLeasePrefix + "<i>".
	SlotLeasePrefix = "latencytier-reboot-slot-"
	// MaxRebootSlots is the most slots the admin may allow (the
	// admission policy matches the slots by name, up to this many).
	MaxRebootSlots = 16
	// SlotLeaseDuration is how long a slot stays its holder's without
	// the holder giving it back: longer than the manager's default
	// bootTimeout (15m), so a slot outlives any reboot the manager still
	// waits for; after it another node may take the slot over.
	SlotLeaseDuration = 20 * time.Minute
)

// eventRebootRefused is the reason of the event a refused reboot emits.
const eventRebootRefused = "RebootRefused"

// SlotName is the Lease of slot i.
func SlotName(i int) string { return SlotLeasePrefix + strconv.Itoa(i) }

// readRebootSlots reads the admin's number of reboot slots from file (key
// slots of ConfigMap latencytier-reboots, mounted): a whole number from 0
// to MaxRebootSlots.
func readRebootSlots(file string) (int, error) {
	if file == "" {
		return 0, errors.New("the agent runs without --reboot-slots-file (key slots of ConfigMap latencytier-reboots)")
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("the cluster admin's ConfigMap latencytier-reboots (key slots) is not mounted at %s", file)
	}
	if err != nil {
		return 0, fmt.Errorf("reading the number of reboot slots: %w", err)
	}
	s := strings.TrimSpace(string(b))
	n, err := strconv.Atoi(s)
	// One or two digits, as the admission policy reads it.
	if err != nil || len(s) > 2 || strings.Trim(s, "0123456789") != "" || n > MaxRebootSlots {
		return 0, fmt.Errorf("key slots of ConfigMap latencytier-reboots is %q, not a number of slots from 0 to %d", bound.String(s, 32), MaxRebootSlots)
	}
	return n, nil
}

// cordonedFor says why n is not cordoned by the manager for revision; ""
// when it is.
func cordonedFor(n *corev1.Node, revision string) string {
	why := "node not cordoned by the manager for revision " + revision
	marker, marked := n.Annotations[v1alpha1.RebootCordonAnnotation]
	switch {
	case !n.Spec.Unschedulable:
		return why + ": the node is schedulable"
	case !marked:
		return why + ": cordoned without the manager's marker " + v1alpha1.RebootCordonAnnotation
	case marker != revision:
		return fmt.Sprintf("%s: the manager's marker %s names revision %q", why, v1alpha1.RebootCordonAnnotation, bound.String(marker, 128))
	}
	return ""
}

// slot is reboot slot Index as read: its Lease, nil when there is none.
type slot struct {
	Index int
	Lease *coordinationv1.Lease
}

// holder is the node holding s at now, "" when it is free (no Lease, no
// holder, or a hold that expired).
func (s slot) holder(now time.Time) string {
	if s.Lease == nil {
		return ""
	}
	h := ptr.Deref(s.Lease.Spec.HolderIdentity, "")
	if h == "" {
		return ""
	}
	since := s.Lease.Spec.RenewTime
	if since == nil {
		since = s.Lease.Spec.AcquireTime
	}
	d := SlotLeaseDuration
	if sec := ptr.Deref(s.Lease.Spec.LeaseDurationSeconds, 0); sec > 0 {
		d = time.Duration(sec) * time.Second
	}
	if since == nil || !now.Before(since.Add(d)) {
		return ""
	}
	return h
}

// pickSlot is the pure choice of the slot node takes at now among slots
// (every slot the admin allows, in order): the one it holds already, else
// the first free one (never held, given back, or expired). Refusal says
// why there is none.
func pickSlot(slots []slot, node string, now time.Time) (index int, refusal string) {
	if len(slots) == 0 {
		return -1, "no reboot slot: the cluster admin allows 0 (key slots of ConfigMap latencytier-reboots)"
	}
	free := -1
	var holders []string
	for _, s := range slots {
		switch h := s.holder(now); h {
		case node:
			return s.Index, ""
		case "":
			if free < 0 {
				free = s.Index
			}
		default:
			holders = append(holders, h)
		}
	}
	if free >= 0 {
		return free, ""
	}
	return -1, fmt.Sprintf("no reboot slot free: %d of %d held by %s", len(holders), len(slots), strings.Join(holders, ", "))
}

// releaseDue: the slot rec holds goes back now: the node booted since the
// agent asked (rec.FromBoot is not bootID), or the request is no longer
// standing for rec's revision (taken back) and no reboot the agent asked
// for is in flight (failAfter passed since it asked).
func releaseDue(spec *v1alpha1.NodeRebootSpec, rec *rebootRecord, bootID string, now time.Time, failAfter time.Duration) bool {
	if rec == nil || rec.Slot == "" {
		return false
	}
	if rec.FromBoot != bootID {
		return true
	}
	standing := spec != nil && spec.Phase == v1alpha1.RebootRequested && spec.Revision == rec.Revision
	return !standing && now.Sub(rec.RequestedAt) >= failAfter
}

// guardReboot makes the node's own checks before a reboot for revision:
// its Node cordoned by the manager for it, and a reboot slot taken for the
// node. It returns the slot's name, or why the reboot is refused.
func (r *Reconciler) guardReboot(ctx context.Context, revision string) (string, string) {
	n := &corev1.Node{}
	if err := r.reader().Get(ctx, types.NamespacedName{Name: r.NodeName}, n); err != nil {
		return "", fmt.Sprintf("node not cordoned by the manager for revision %s: reading Node %s: %v", revision, r.NodeName, err)
	}
	if why := cordonedFor(n, revision); why != "" {
		return "", why
	}
	return r.takeSlot(ctx)
}

// takeSlot takes a reboot slot for the node (pickSlot), or says why not.
func (r *Reconciler) takeSlot(ctx context.Context) (string, string) {
	count, err := readRebootSlots(r.Boot.SlotsFile)
	if err != nil {
		return "", "no reboot slot: " + err.Error()
	}
	ns := r.Boot.SlotsNamespace
	if ns == "" {
		return "", "no reboot slot: the agent does not know the operator namespace (POD_NAMESPACE)"
	}
	slots := make([]slot, count)
	for i := range slots {
		slots[i].Index = i
		l := &coordinationv1.Lease{}
		err := r.reader().Get(ctx, types.NamespacedName{Namespace: ns, Name: SlotName(i)}, l)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return "", fmt.Sprintf("no reboot slot: reading slot %d: %v", i, err)
		default:
			slots[i].Lease = l
		}
	}
	now := r.now()
	i, refusal := pickSlot(slots, r.NodeName, now)
	if refusal != "" {
		return "", refusal
	}
	t := metav1.NewMicroTime(now)
	spec := coordinationv1.LeaseSpec{HolderIdentity: ptr.To(r.NodeName), AcquireTime: &t, RenewTime: &t,
		LeaseDurationSeconds: ptr.To(int32(SlotLeaseDuration / time.Second))}
	l := slots[i].Lease
	if l == nil {
		err = r.Client.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: SlotName(i)}, Spec: spec})
	} else {
		if ptr.Deref(l.Spec.HolderIdentity, "") == r.NodeName {
			spec.AcquireTime = l.Spec.AcquireTime
		}
		l.Spec = spec
		err = r.Client.Update(ctx, l)
	}
	switch {
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		return "", fmt.Sprintf("no reboot slot: another node took slot %d first; trying again on the next pass", i)
	case err != nil:
		return "", fmt.Sprintf("no reboot slot: taking slot %d: %v", i, err)
	}
	return SlotName(i), ""
}

// releaseSlot gives the slot name back (holderIdentity cleared) if the
// node still holds it.
func (r *Reconciler) releaseSlot(ctx context.Context, name string) error {
	l := &coordinationv1.Lease{}
	err := r.reader().Get(ctx, types.NamespacedName{Namespace: r.Boot.SlotsNamespace, Name: name}, l)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading reboot slot %s: %w", name, err)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != r.NodeName {
		return nil // taken over after it expired
	}
	l.Spec.HolderIdentity = nil
	if err := r.Client.Update(ctx, l); err != nil {
		return fmt.Errorf("giving back reboot slot %s: %w", name, err)
	}
	return nil
}

// settleSlot gives back the slot rec holds when releaseDue, and returns
// the record as it stands after.
func (r *Reconciler) settleSlot(ctx context.Context, spec *v1alpha1.NodeRebootSpec, rec *rebootRecord, bootID string) *rebootRecord {
	if !releaseDue(spec, rec, bootID, r.now(), r.failAfter()) {
		return rec
	}
	log := ctrl.LoggerFrom(ctx)
	if err := r.releaseSlot(ctx, rec.Slot); err != nil {
		log.Error(err, "Failed to give back the reboot slot; trying again on the next pass", "slot", rec.Slot)
		return rec
	}
	log.Info("Gave back the reboot slot", "slot", rec.Slot, "revision", rec.Revision)
	out := *rec
	out.Slot = ""
	if err := saveRebootRecord(r.Root, out); err != nil {
		log.Error(err, "Failed to record the reboot slot given back", "slot", rec.Slot)
	}
	return &out
}

// refuseReboot reports a reboot for revision the node's guard refused: a
// Warning event on ln (once per distinct reason), the log, and status.boot's
// message.
func (r *Reconciler) refuseReboot(ctx context.Context, ln *v1alpha1.LatencyNode, st *v1alpha1.LatencyNodeStatus, revision, why string) {
	msg := bound.String(fmt.Sprintf("reboot for %s refused: %s", revision, why), 512)
	st.Boot.Message = msg
	if msg == r.rebootRefused {
		return
	}
	r.rebootRefused = msg
	ctrl.LoggerFrom(ctx).Info("Refused the reboot request", "revision", revision, "why", why)
	if r.Recorder != nil {
		r.Recorder.Eventf(ln, nil, corev1.EventTypeWarning, eventRebootRefused, "Reboot", "%s", msg)
	}
}

// reader reads what the agent does not watch (its Node, the slots).
func (r *Reconciler) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}
