//go:build privileged

package vmtest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/loop"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// The agent's own passes (loop.Reconciler.Reconcile: render, engine,
// status, the reboot step) in the bootloader row, boots 3 to 5 of
// grubBoots. The LatencyNode lives in an in-memory client carried from boot
// to boot in the guest's state directory (the API server is not what this
// row proves; the envtest loop tests are).
//
//  3. TestBootAgentGRUB: baseline update-grub; policy Reboot stages
//     (status Staged, boot/grub Applied); the manager's Rebooting request
//     reboots once, a restarted agent does not ask again (this reboot is
//     handed to guest.sh's marker, which runs systemctl reboot, so the
//     test's checks run to their end).
//  4. TestBootAgentGRUBBooted: a new boot id, Booted, rebootedFor, every
//     argument in /proc/cmdline and CPU 1 in nohz_full; then action Revert:
//     drop-in gone, grub.cfg byte for byte the baseline, Unstaged and no
//     reboot before the manager asks; then the manager's request for the
//     revert, which TestBootAgentGRUBReboot takes after the boot's tests: a
//     fresh agent reboots the VM its own way, systemd.Reboot (reboot.target
//     over systemd's D-Bus socket), only through its guard (the Node
//     cordoned by the manager for the revert, a reboot slot free).
//     TestBootAgentGRUBForged first gives that agent the same request
//     forged (no cordon; no slot free): no reboot job, the boot id stays.
//  5. TestBootAgentGRUBReverted: a new boot id and rebootedFor the revert
//     (from the record the agent wrote before it asked systemd); the
//     arguments gone from the kernel's view, /proc/cmdline byte for byte
//     the command line boot 3 started with, grub.cfg the baseline, no
//     journal.

const bootNode = "vm-boot"

func bootScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// bootClient is the in-memory API holding ln and its Node, cordoned with
// the manager's marker for the reboot ln asks for (the manager's cordon
// outlives the boot). The agent's guard reads the Node; its reboot slots
// (Leases) start free in every boot.
func bootClient(t *testing.T, ln *v1alpha1.LatencyNode) client.Client {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: bootNode}}
	if rec := ln.Spec.Reboot; rec != nil {
		node.Spec.Unschedulable = true
		node.Annotations = map[string]string{v1alpha1.RebootCordonAnnotation: rec.Revision}
	}
	return forgedClient(t, ln, node)
}

// forgedClient is the in-memory API holding ln and node as given.
func forgedClient(t *testing.T, ln *v1alpha1.LatencyNode, node *corev1.Node, more ...client.Object) client.Client {
	t.Helper()
	ln.ResourceVersion = ""
	objs := append([]client.Object{ln, node}, more...)
	return fake.NewClientBuilder().WithScheme(bootScheme(t)).WithStatusSubresource(&v1alpha1.LatencyNode{}).WithObjects(objs...).Build()
}

// requestReboot plays the manager's reboot for revision from boot bootID:
// the Node cordoned with its marker, then the request.
func requestReboot(t *testing.T, c client.Client, revision, bootID string) {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: bootNode}, n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Unschedulable = true
	n.Annotations = map[string]string{v1alpha1.RebootCordonAnnotation: revision}
	if err := c.Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	updateNode(t, c, func(s *v1alpha1.LatencyNodeSpec) {
		s.Reboot = &v1alpha1.NodeRebootSpec{Revision: revision, Phase: v1alpha1.RebootRequested, Since: metav1.Now(), BootID: bootID}
	})
}

// slotsNamespace holds the row's reboot slots.
const slotsNamespace = "latencytier-system"

// bootAgent is a freshly started agent (nothing in memory from before);
// asked to reboot, it leaves guest.sh's marker for the next boot's tests.
func bootAgent(t *testing.T, c client.Client, root *host.Root, reboots *int) *loop.Reconciler {
	r := realAgent(t, c, root)
	r.Boot.Reboot = func(context.Context) error {
		*reboots++
		askReboot(t)
		return nil
	}
	return r
}

// realAgent is a freshly started agent that reboots the way the agent
// does (BootOptions.Reboot nil: systemd.Reboot).
func realAgent(t *testing.T, c client.Client, root *host.Root) *loop.Reconciler {
	slots := filepath.Join(t.TempDir(), "slots")
	if err := os.WriteFile(slots, []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &loop.Reconciler{Client: c, NodeName: bootNode, Root: root, Resync: time.Minute,
		Engine: &apply.Engine{Root: root, Log: testr.New(t)},
		Boot:   loop.BootOptions{SlotsFile: slots, SlotsNamespace: slotsNamespace}}
}

func agentPass(t *testing.T, r *loop.Reconciler) {
	t.Helper()
	ctx := ctrl.LoggerInto(context.Background(), testr.New(t))
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: bootNode}}); err != nil {
		t.Fatalf("agent pass: %v", err)
	}
}

func getNode(t *testing.T, c client.Client) *v1alpha1.LatencyNode {
	t.Helper()
	ln := &v1alpha1.LatencyNode{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: bootNode}, ln); err != nil {
		t.Fatal(err)
	}
	return ln
}

func updateNode(t *testing.T, c client.Client, f func(*v1alpha1.LatencyNodeSpec)) {
	t.Helper()
	ln := getNode(t, c)
	f(&ln.Spec)
	ln.Generation++
	if err := c.Update(context.Background(), ln); err != nil {
		t.Fatal(err)
	}
}

func saveNode(t *testing.T, c client.Client) {
	t.Helper()
	b, err := json.Marshal(getNode(t, c))
	if err != nil {
		t.Fatal(err)
	}
	saveState(t, "agent-node", string(b))
}

func loadNode(t *testing.T) *v1alpha1.LatencyNode {
	t.Helper()
	ln := &v1alpha1.LatencyNode{}
	if err := json.Unmarshal([]byte(loadState(t, "agent-node")), ln); err != nil {
		t.Fatal(err)
	}
	return ln
}

func TestBootAgentGRUB(t *testing.T) {
	root := grubRow(t)
	ctx := context.Background()
	if err := grubStager(root).Run(ctx, "latencytier-update-grub.service", []string{"/usr/sbin/update-grub"}); err != nil {
		t.Fatalf("baseline update-grub: %v", err)
	}
	baseline, err := os.ReadFile(grubCfg)
	if err != nil {
		t.Fatal(err)
	}
	saveState(t, "agent-grub-baseline", string(baseline))
	saveState(t, "agent-cmdline", cmdline(t, root))
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: bootNode, Generation: 1},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "vmtest", ProfileGeneration: 1,
			Tuning: v1alpha1.TuningSpec{
				CPUs:           &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("1"), NamespaceSelector: &v1alpha1.NamespaceSelector{}},
				BootParameters: &v1alpha1.BootParametersSpec{Policy: v1alpha1.BootReboot, SkewTick: v1alpha1.Enabled},
			}}}
	c := bootClient(t, ln)
	reboots := 0
	start := time.Now()
	agentPass(t, bootAgent(t, c, root, &reboots))
	t.Logf("staging pass took %s", time.Since(start).Round(time.Second))
	got := getNode(t, c)
	b := got.Status.Boot
	t.Logf("after staging: bootedAt %v appliedAfterBoot %v; conditions %+v", b.BootedAt, b.AppliedAfterBoot, got.Status.Conditions)
	if b == nil || b.State != v1alpha1.BootStaged || b.Backend != "GRUB" {
		t.Fatalf("after the staging pass: %+v", b)
	}
	var gs *v1alpha1.SettingResult
	for i := range got.Status.Settings {
		if got.Status.Settings[i].Setting == bootargs.SettingGRUB {
			gs = &got.Status.Settings[i]
		}
	}
	if gs == nil || gs.State != v1alpha1.SettingApplied {
		t.Fatalf("boot/grub setting %+v", gs)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.NodeRebootRequired) {
		t.Errorf("RebootRequired not true while staged: %+v", got.Status.Conditions)
	}
	cfg, _ := os.ReadFile(grubCfg)
	if !strings.Contains(string(cfg), gs.Desired) {
		t.Fatalf("%s lacks %q after the agent's pass", grubCfg, gs.Desired)
	}
	saveState(t, "agent-grub-args", gs.Desired)
	if reboots != 0 {
		t.Fatal("rebooted without a request")
	}
	requestReboot(t, c, "vmtest-r1", b.BootID)
	agentPass(t, bootAgent(t, c, root, &reboots))
	agentPass(t, bootAgent(t, c, root, &reboots)) // restarted
	if reboots != 1 {
		t.Fatalf("asked for %d reboots for one revision, want 1", reboots)
	}
	saveState(t, "agent-boot", b.BootID)
	saveNode(t, c)
}

func TestBootAgentGRUBBooted(t *testing.T) {
	root := grubRow(t)
	if bootID(t, root) == loadState(t, "agent-boot") {
		t.Fatal("boot id unchanged: the VM did not reboot")
	}
	c := bootClient(t, loadNode(t))
	reboots := 0
	start := time.Now()
	agentPass(t, bootAgent(t, c, root, &reboots))
	t.Logf("first pass after the boot took %s", time.Since(start).Round(time.Second))
	got := getNode(t, c)
	b := got.Status.Boot
	if b == nil || b.State != v1alpha1.BootBooted || b.RebootedFor != "vmtest-r1" || b.KernelNohzFull != "1" || reboots != 0 {
		t.Fatalf("after the reboot (%d more reboots): %+v", reboots, b)
	}
	for _, a := range b.Arguments {
		if !a.Present {
			t.Errorf("%s not on the running command line %q", a.Argument, read(t, root, root.Proc("cmdline")))
		}
	}
	if b.AppliedAfterBoot == nil {
		t.Errorf("appliedAfterBoot not reported (bootedAt %v); conditions %+v; settings %+v", b.BootedAt, got.Status.Conditions, got.Status.Settings)
	} else {
		t.Logf("boot to Applied: %s; kernel view: isolated %q nohz_full %q", b.AppliedAfterBoot.Duration, b.KernelIsolated, b.KernelNohzFull)
	}
	// The manager reverts first and asks for the reboot later: the
	// revert pass restores the files and waits for the request.
	updateNode(t, c, func(s *v1alpha1.LatencyNodeSpec) { s.Action = v1alpha1.ActionRevert })
	agentPass(t, bootAgent(t, c, root, &reboots))
	if root.Exists(root.Path(bootargs.DropIn)) {
		t.Error("drop-in left after the revert pass")
	}
	cfg, _ := os.ReadFile(grubCfg)
	if string(cfg) != loadState(t, "agent-grub-baseline") {
		t.Errorf("%s after the revert pass differs from the baseline:\n%s", grubCfg, cfg)
	}
	if b := getNode(t, c).Status.Boot; b == nil || b.State != v1alpha1.BootUnstaged || reboots != 0 {
		t.Fatalf("reverted, the running kernel still isolated: want Unstaged and no reboot before the request, got %d reboots, %+v", reboots, b)
	}
	requestReboot(t, c, "vmtest-revert", b.BootID)
	saveState(t, "agent-boot", bootID(t, root))
	saveNode(t, c)
	askReboot(t)
	saveState(t, "reboot-by", "agent_vmtest ^TestBootAgentGRUBReboot$")
}

// TestBootAgentGRUBForged: boot 4's request (for the revert) forged. A
// fresh agent that reboots the way the agent does (systemd.Reboot over the
// guest's systemd) reads it while its Node is not cordoned by the manager,
// then while the manager's cordon is there but the one reboot slot is
// another node's: each time it refuses, says why in status.boot, writes
// no reboot record, and systemd holds no reboot job; the boot id stays.
// The request itself is boot 4's real one, which TestBootAgentGRUBReboot
// then carries out through the same guard.
func TestBootAgentGRUBForged(t *testing.T) {
	root := grubRow(t)
	boot := bootID(t, root)
	record := root.Path("var/lib/latencytier/reboot.json")
	before, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("the record of boot 3's reboot: %v", err)
	}
	held := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: slotsNamespace, Name: loop.SlotName(0)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("vm-other"), RenewTime: &metav1.MicroTime{Time: time.Now()},
			LeaseDurationSeconds: ptr.To(int32(600))}}
	cordoned := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: bootNode,
		Annotations: map[string]string{v1alpha1.RebootCordonAnnotation: "vmtest-revert"}}, Spec: corev1.NodeSpec{Unschedulable: true}}
	for _, tc := range []struct {
		name string
		c    client.Client
		want string
	}{
		{"not cordoned", forgedClient(t, loadNode(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: bootNode}}),
			"reboot for vmtest-revert refused: node not cordoned by the manager for revision vmtest-revert"},
		{"no slot free", forgedClient(t, loadNode(t), cordoned, held),
			"reboot for vmtest-revert refused: no reboot slot free: 1 of 1 held by vm-other"},
	} {
		agentPass(t, realAgent(t, tc.c, root))
		if b := getNode(t, tc.c).Status.Boot; b == nil || b.State != v1alpha1.BootUnstaged || !strings.Contains(b.Message, tc.want) {
			t.Errorf("%s: status.boot %+v, want Unstaged saying %q", tc.name, b, tc.want)
		}
		if after, _ := os.ReadFile(record); string(after) != string(before) {
			t.Errorf("%s: the reboot record changed:\n%s\nto\n%s", tc.name, before, after)
		}
	}
	time.Sleep(5 * time.Second)
	out, err := exec.Command("systemctl", "list-jobs", "--no-legend", "--plain").CombinedOutput()
	if err != nil || strings.Contains(string(out), "reboot") || strings.Contains(string(out), "shutdown") {
		t.Errorf("systemd's jobs after the forged requests (%v): %s", err, out)
	}
	if now := bootID(t, root); now != boot {
		t.Fatalf("boot id %s, was %s", now, boot)
	}
}

// TestBootAgentGRUBReboot is how guest.sh reboots after boot 4's tests
// (its marker reboot-by, phase ".boot4-reboot"): a fresh agent takes the
// manager's request for the revert and reboots the VM its own way,
// systemd.Reboot, whose job stops this test with everything else. It
// fails if the agent reports the request failed or the test outlives it;
// TestBootAgentGRUBReverted checks the boot that follows.
func TestBootAgentGRUBReboot(t *testing.T) {
	root, row := vm(t)
	if !strings.Contains(row, "-grub") {
		t.Skip("bootloader row only (6.12-grub-cgroup2)")
	}
	if got, phase := os.Getenv("LATENCYTIER_VM_PHASE"), grubPhase(grubBoot(t, "TestBootAgentGRUBBooted"))+"-reboot"; got != phase {
		t.Skipf("boot phase %q, this test runs in %q (guest.sh's reboot step)", got, phase)
	}
	c := bootClient(t, loadNode(t))
	t.Logf("boot %s: the agent asks systemd for reboot.target", bootID(t, root))
	agentPass(t, realAgent(t, c, root))
	if b := getNode(t, c).Status.Boot; b == nil || b.State == v1alpha1.BootFailed {
		t.Fatalf("the agent's reboot: %+v", b)
	}
	const wait = 3 * time.Minute
	time.Sleep(wait)
	t.Fatalf("still running %s after the agent's reboot request", wait)
}

func TestBootAgentGRUBReverted(t *testing.T) {
	root := grubRow(t)
	if bootID(t, root) == loadState(t, "agent-boot") {
		t.Fatal("boot id unchanged: the VM did not reboot")
	}
	c := bootClient(t, loadNode(t))
	reboots := 0
	agentPass(t, bootAgent(t, c, root, &reboots))
	b := getNode(t, c).Status.Boot
	if b == nil || b.State != v1alpha1.BootNotNeeded || b.RebootedFor != "vmtest-revert" || b.KernelNohzFull != "" || reboots != 0 {
		t.Fatalf("after revert and reboot: %d reboots, %+v", reboots, b)
	}
	if got := bootargs.Check(root, bootargs.Parse(loadState(t, "agent-grub-args"))); len(got.Present) > 0 {
		t.Errorf("/proc/cmdline still holds %q", got.Present)
	}
	if got, first := cmdline(t, root), loadState(t, "agent-cmdline"); got != first {
		t.Errorf("/proc/cmdline after revert and reboot\n  %q\nis not the one before staging\n  %q", got, first)
	}
	cfg, _ := os.ReadFile(grubCfg)
	if string(cfg) != loadState(t, "agent-grub-baseline") || root.Exists(root.Path(bootargs.DropIn)) {
		t.Errorf("%s differs from the baseline, or the drop-in is back", grubCfg)
	}
	if root.Exists(root.Path("var/lib/latencytier/journal.json")) {
		t.Error("journal left after a complete revert")
	}
}
