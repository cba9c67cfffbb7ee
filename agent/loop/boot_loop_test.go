package loop

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/bootargs/bootargstest"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// TestAgentStagesAndRebootsForBootParameters drives the agent's passes
// against a real API server on a temp-dir Debian host: policy Reboot stages
// the drop-in (status Staged, boot/grub Applied, RebootRequired), the
// manager's Rebooting request reboots once (a restarted agent does not
// again), the next boot reports Booted with rebootedFor and the time to
// Applied, and policy ReportOnly takes the drop-in out with grub.cfg back
// byte for byte.
func TestAgentStagesAndRebootsForBootParameters(t *testing.T) {
	f := newBootFixture(t, "node-boot")
	root, baseline, reboots, agent, get, update := f.root, f.baseline, f.reboots, f.agent, f.get, f.update
	r := agent()
	line := "nohz_full=2-3 rcu_nocbs=2-3 isolcpus=managed_irq,2-3 irqaffinity=0-1"

	pass(t, r, "node-boot")
	got := get()
	b := got.Status.Boot
	if b == nil || b.State != v1alpha1.BootStaged || b.Backend != "GRUB" || len(b.Arguments) != 4 || b.BootedAt == nil {
		t.Fatalf("after staging: %+v", b)
	}
	if s := setting(got.Status.Settings, bootargs.SettingGRUB); s == nil || s.State != v1alpha1.SettingApplied {
		t.Fatalf("boot/grub setting %+v", s)
	}
	if !conditionIs(got, v1alpha1.NodeRebootRequired, metav1.ConditionTrue) || !strings.Contains(testroot.Read(t, root.Path(bootargs.GRUBCfg)), "quiet "+line) {
		t.Fatalf("RebootRequired %+v; grub.cfg %s", got.Status.Conditions, testroot.Read(t, root.Path(bootargs.GRUBCfg)))
	}
	if b.AppliedAfterBoot == nil {
		t.Error("appliedAfterBoot unset although the profile is Applied")
	}

	f.requestReboot(t, "gateway-r1", b.BootID)
	pass(t, r, "node-boot")
	pass(t, agent(), "node-boot") // a restarted agent, the same boot
	if *reboots != 1 {
		t.Fatalf("rebooted %d times for one revision", *reboots)
	}

	// The node comes back: a new boot id, the arguments on the command line.
	testroot.Write(t, root.Proc("sys", "kernel", "random", "boot_id"), "99999999-0000-0000-0000-000000000000\n")
	testroot.Write(t, root.Proc("cmdline"), "BOOT_IMAGE=/vmlinuz root=/dev/vda ro quiet "+line+"\n")
	testroot.Write(t, root.Sys("devices", "system", "cpu", "nohz_full"), "2-3\n")
	testroot.Write(t, root.Sys("devices", "system", "cpu", "isolated"), "2-3\n")
	r = agent()
	pass(t, r, "node-boot")
	got = get()
	b = got.Status.Boot
	if b.State != v1alpha1.BootBooted || b.RebootedFor != "gateway-r1" || b.KernelNohzFull != "2-3" || b.KernelIsolated != "2-3" || *reboots != 1 {
		t.Fatalf("after the boot (%d reboots): %+v", *reboots, b)
	}
	for _, a := range b.Arguments {
		if !a.Present {
			t.Errorf("%s not present", a.Argument)
		}
	}
	if !conditionIs(got, v1alpha1.NodeRebootRequired, metav1.ConditionFalse) {
		t.Errorf("RebootRequired after the boot: %+v", got.Status.Conditions)
	}

	// Back to report only: the drop-in goes, grub.cfg is as before.
	update(func(s *v1alpha1.LatencyNodeSpec) {
		s.Tuning.BootParameters.Policy = v1alpha1.BootReportOnly
		s.Reboot = nil
	})
	pass(t, r, "node-boot")
	if root.Exists(root.Path(bootargs.DropIn)) || testroot.Read(t, root.Path(bootargs.GRUBCfg)) != baseline {
		t.Fatalf("report only left the drop-in (%v) or a different grub.cfg", root.Exists(root.Path(bootargs.DropIn)))
	}
	if b := get().Status.Boot; b.State != v1alpha1.BootBooted {
		t.Errorf("report only on a booted node: %+v", b)
	}
}

// bootFixture is a temp-dir Debian host (GRUB, four CPUs) whose agent
// talks to a real API server, with one LatencyNode of policy Reboot
// isolating CPUs 2-3.
type bootFixture struct {
	root     *host.Root
	baseline string
	reboots  *int
	agent    func() *Reconciler
	get      func() *v1alpha1.LatencyNode
	update   func(func(*v1alpha1.LatencyNodeSpec))
	// c is the admin's client; name the node's; slotsFile the admin's
	// number of reboot slots (one); events what the agents recorded.
	c         client.Client
	name      string
	slotsFile string
	events    *events.FakeRecorder
}

// slotsNamespace is where the fixture's reboot slots live.
const slotsNamespace = "latencytier-system"

// requestReboot plays the manager's reboot for revision: the node cordoned
// with the manager's marker, then the request (phase Rebooting from boot
// bootID).
func (f bootFixture) requestReboot(t *testing.T, revision, bootID string) {
	t.Helper()
	f.cordon(t, revision)
	f.update(func(s *v1alpha1.LatencyNodeSpec) {
		s.Reboot = &v1alpha1.NodeRebootSpec{Revision: revision, Phase: v1alpha1.RebootRequested, Since: metav1.Now(), BootID: bootID}
	})
}

// cordon cordons the node the way the manager does for revision ("": a
// person's cordon, without the marker).
func (f bootFixture) cordon(t *testing.T, revision string) {
	t.Helper()
	n := &corev1.Node{}
	if err := f.c.Get(context.Background(), types.NamespacedName{Name: f.name}, n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Unschedulable = true
	if revision != "" {
		n.Annotations = map[string]string{v1alpha1.RebootCordonAnnotation: revision}
	}
	if err := f.c.Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

func newBootFixture(t *testing.T, name string) bootFixture {
	t.Helper()
	c, _ := startAPI(t)
	ctx := context.Background()
	files := bootargstest.Files("quiet")
	files["proc/stat"] = "cpu 1 2 3\nbtime 1700000000\n"
	files["sys/devices/system/cpu/online"] = "0-3"
	root := fakeHostWith(t, files)
	if err := bootargstest.MakeExecutable(root); err != nil {
		t.Fatal(err)
	}
	u := &bootargstest.UpdateGRUB{Root: root}
	if err := u.Run(ctx, "baseline", nil); err != nil {
		t.Fatal(err)
	}
	f := bootFixture{root: root, baseline: testroot.Read(t, root.Path(bootargs.GRUBCfg)), reboots: new(int),
		c: c, name: name, slotsFile: filepath.Join(t.TempDir(), "slots"), events: events.NewFakeRecorder(100)}
	testroot.Write(t, f.slotsFile, "1")
	for _, obj := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: slotsNamespace}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	f.agent = func() *Reconciler {
		return &Reconciler{Client: c, NodeName: name, Root: root, Resync: time.Minute,
			Engine:   &apply.Engine{Root: root, Log: testr.New(t), HostTool: u.Run},
			Recorder: f.events,
			Boot: BootOptions{Reboot: func(context.Context) error { *f.reboots++; return nil },
				SlotsFile: f.slotsFile, SlotsNamespace: slotsNamespace}}
	}
	sp := spec()
	sp.Tuning.CPUs = &v1alpha1.CPUSpec{Reserved: ptr.To("0-1"), Isolated: ptr.To("2-3"), NamespaceSelector: &v1alpha1.NamespaceSelector{}}
	sp.Tuning.BootParameters = &v1alpha1.BootParametersSpec{Policy: v1alpha1.BootReboot}
	if err := c.Create(ctx, &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sp}); err != nil {
		t.Fatal(err)
	}
	f.get = func() *v1alpha1.LatencyNode {
		t.Helper()
		out := &v1alpha1.LatencyNode{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	f.update = func(fn func(*v1alpha1.LatencyNodeSpec)) {
		t.Helper()
		cur := f.get()
		fn(&cur.Spec)
		if err := c.Update(ctx, cur); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// boot plays the node's reboot: a new boot id and cmdline as the kernel
// command line's arguments after "quiet", and the kernel's view of them.
func (f bootFixture) boot(t *testing.T, id, args, nohz string) {
	testroot.Write(t, f.root.Proc("sys", "kernel", "random", "boot_id"), id+"\n")
	testroot.Write(t, f.root.Proc("cmdline"), strings.TrimSpace("BOOT_IMAGE=/vmlinuz root=/dev/vda ro quiet "+args)+"\n")
	testroot.Write(t, f.root.Sys("devices", "system", "cpu", "nohz_full"), nohz+"\n")
	testroot.Write(t, f.root.Sys("devices", "system", "cpu", "isolated"), nohz+"\n")
}

// TestAgentUnstagedArgumentsNeedARebootOut: a node booted with the
// arguments it staged for one revision, moved (a rollback) to a revision
// without boot parameters or to Revert, takes the drop-in out and reports
// Unstaged with the arguments the running kernel still holds, and
// RebootRequired; the manager's request for that reboot is honoured once;
// the next boot, without them, reports NotNeeded.
func TestAgentUnstagedArgumentsNeedARebootOut(t *testing.T) {
	for _, revert := range []bool{false, true} {
		name := map[bool]string{false: "node-back", true: "node-back-revert"}[revert]
		t.Run(name, func(t *testing.T) {
			f := newBootFixture(t, name)
			line := "nohz_full=2-3 rcu_nocbs=2-3 isolcpus=managed_irq,2-3 irqaffinity=0-1"
			pass(t, f.agent(), name)
			b := f.get().Status.Boot
			if b == nil || b.State != v1alpha1.BootStaged {
				t.Fatalf("after staging: %+v", b)
			}
			f.requestReboot(t, "r2", b.BootID)
			pass(t, f.agent(), name)
			f.boot(t, "11111111-0000-0000-0000-000000000000", line, "2-3")
			f.update(func(s *v1alpha1.LatencyNodeSpec) { s.Reboot = nil })
			pass(t, f.agent(), name)
			if b := f.get().Status.Boot; b.State != v1alpha1.BootBooted || *f.reboots != 1 {
				t.Fatalf("after the boot for r2 (%d reboots): %+v", *f.reboots, b)
			}

			// Rolled back: to a revision that asks for no boot parameter
			// (and isolates nothing), or reverted.
			f.update(func(s *v1alpha1.LatencyNodeSpec) {
				s.Tuning.CPUs, s.Tuning.IRQ, s.Tuning.BootParameters, s.Revision = nil, nil, nil, "r1"
				if revert {
					s.Action, s.Revision = v1alpha1.ActionRevert, ""
				}
			})
			r := f.agent()
			pass(t, r, name)
			got := f.get()
			b = got.Status.Boot
			if f.root.Exists(f.root.Path(bootargs.DropIn)) || testroot.Read(t, f.root.Path(bootargs.GRUBCfg)) != f.baseline {
				t.Fatalf("the drop-in is left (%v) or grub.cfg differs from the baseline", f.root.Exists(f.root.Path(bootargs.DropIn)))
			}
			if b == nil || b.State != v1alpha1.BootUnstaged || len(b.Arguments) != 4 || !b.Arguments[0].Present {
				t.Fatalf("rolled back on a kernel holding the arguments: want Unstaged with four present, got %+v", b)
			}
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.NodeRebootRequired)
			if !revert && (c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonCmdlineHoldsUnstaged) {
				t.Errorf("RebootRequired %+v", c)
			}
			// Unstaged stays while the kernel holds them (the journal
			// entry is gone now).
			pass(t, r, name)
			if b := f.get().Status.Boot; b.State != v1alpha1.BootUnstaged {
				t.Fatalf("second pass forgot the unstaged arguments: %+v", b)
			}

			f.requestReboot(t, "r2-back", b.BootID)
			pass(t, r, name)
			pass(t, f.agent(), name)
			if *f.reboots != 2 {
				t.Fatalf("the reboot out: %d reboots in all, want 2", *f.reboots)
			}
			f.boot(t, "22222222-0000-0000-0000-000000000000", "", "")
			pass(t, f.agent(), name)
			b = f.get().Status.Boot
			if b.State != v1alpha1.BootNotNeeded || b.RebootedFor != "r2-back" || *f.reboots != 2 {
				t.Fatalf("back without the arguments (%d reboots): %+v", *f.reboots, b)
			}
		})
	}
}

func setting(rs []v1alpha1.SettingResult, id string) *v1alpha1.SettingResult {
	for i := range rs {
		if rs[i].Setting == id {
			return &rs[i]
		}
	}
	return nil
}

// TestAgentAppliedInTheFirstPassAfterBoot: a reboot resets what the kernel
// holds, the cpuset controller of the cgroup root's children among it, so
// the first pass after a boot must enable the controller before it can
// confine the slices. That pass reports the profile Applied, and with it
// the time from boot to Applied (the tuning-ready gate waits for it), not a
// resync later: the agent renders again in the same pass once its writes
// made room for the settings that waited on them. The VM row
// (agent/vmtest TestBootAgentGRUBBooted) failed on exactly this.
func TestAgentAppliedInTheFirstPassAfterBoot(t *testing.T) {
	c, _ := startAPI(t)
	ctx := context.Background()
	files := bootargstest.Files("quiet")
	files["proc/stat"] = "cpu 1 2 3\nbtime 1700000000\n"
	files["sys/devices/system/cpu/online"] = "0-3"
	root := fakeHostWith(t, files)
	if err := bootargstest.MakeExecutable(root); err != nil {
		t.Fatal(err)
	}
	u := &bootargstest.UpdateGRUB{Root: root}
	slices := []string{"init.scope", "system.slice", "user.slice"}
	// What the kernel does on "+cpuset" in the root's subtree_control: the
	// children get their cpuset files.
	hook := func(stage apply.Stage, id string) {
		if stage == apply.StageWritten && id == "cpuset/cgroup.subtree_control" {
			for _, s := range slices {
				testroot.Write(t, root.Sys("fs", "cgroup", s, "cpuset.cpus"), "")
			}
		}
	}
	agent := &Reconciler{Client: c, NodeName: "node-boot1", Root: root, Resync: time.Hour,
		Engine: &apply.Engine{Root: root, Log: testr.New(t), HostTool: u.Run, Hook: hook},
		Boot:   BootOptions{Reboot: func(context.Context) error { return nil }}}
	sp := spec()
	sp.Tuning.CPUs = &v1alpha1.CPUSpec{Reserved: ptr.To("0-1"), Isolated: ptr.To("2-3"), NamespaceSelector: &v1alpha1.NamespaceSelector{}}
	sp.Tuning.BootParameters = &v1alpha1.BootParametersSpec{Policy: v1alpha1.BootReboot}
	if err := c.Create(ctx, &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-boot1"}, Spec: sp}); err != nil {
		t.Fatal(err)
	}
	// A fresh boot: the controller is off for the root's children, whose
	// cpuset files are not there.
	testroot.Write(t, root.Sys("fs", "cgroup", "cgroup.subtree_control"), "cpu")
	for _, s := range slices {
		if err := os.Remove(root.Sys("fs", "cgroup", s, "cpuset.cpus")); err != nil {
			t.Fatal(err)
		}
	}
	pass(t, agent, "node-boot1")
	got := &v1alpha1.LatencyNode{}
	if err := c.Get(ctx, types.NamespacedName{Name: "node-boot1"}, got); err != nil {
		t.Fatal(err)
	}
	if !conditionIs(got, v1alpha1.NodeApplied, metav1.ConditionTrue) {
		t.Fatalf("not Applied after the first pass of the boot: %+v\nsettings %+v", got.Status.Conditions, got.Status.Settings)
	}
	for _, s := range slices {
		if v := testroot.Read(t, root.Sys("fs", "cgroup", s, "cpuset.cpus")); strings.TrimSpace(v) != "0-1" {
			t.Errorf("%s cpuset.cpus %q, want 0-1", s, v)
		}
	}
	if b := got.Status.Boot; b == nil || b.AppliedAfterBoot == nil {
		t.Errorf("appliedAfterBoot not reported in the first pass: %+v", b)
	}
}

// TestAgentStagesThroughSystemdBoot: on a systemd-boot host the agent's
// pass stages through /etc/kernel/cmdline and kernel-install (status
// Staged, backend SystemdBoot, setting boot/systemd-boot Applied), and
// policy ReportOnly takes the arguments out, the file byte for byte as it
// was.
func TestAgentStagesThroughSystemdBoot(t *testing.T) {
	c, _ := startAPI(t)
	ctx := context.Background()
	orig := "root=UUID=1234 ro quiet\n"
	files := bootargstest.SystemdBootFiles(orig)
	files["proc/stat"] = "cpu 1 2 3\nbtime 1700000000\n"
	files["sys/devices/system/cpu/online"] = "0-3"
	root := fakeHostWith(t, files)
	if err := bootargstest.MakeKernelInstallExecutable(root); err != nil {
		t.Fatal(err)
	}
	ki := &bootargstest.KernelInstall{Root: root}
	r := &Reconciler{Client: c, NodeName: "node-sdboot", Root: root, Resync: time.Minute,
		Engine: &apply.Engine{Root: root, Log: testr.New(t), HostTool: ki.Run},
		Boot:   BootOptions{Reboot: func(context.Context) error { return nil }}}
	sp := spec()
	sp.Tuning.CPUs = &v1alpha1.CPUSpec{Reserved: ptr.To("0-1"), Isolated: ptr.To("2-3"), NamespaceSelector: &v1alpha1.NamespaceSelector{}}
	sp.Tuning.BootParameters = &v1alpha1.BootParametersSpec{Policy: v1alpha1.BootReboot}
	if err := c.Create(ctx, &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-sdboot"}, Spec: sp}); err != nil {
		t.Fatal(err)
	}
	get := func() *v1alpha1.LatencyNode {
		t.Helper()
		out := &v1alpha1.LatencyNode{}
		if err := c.Get(ctx, types.NamespacedName{Name: "node-sdboot"}, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	line := "nohz_full=2-3 rcu_nocbs=2-3 isolcpus=managed_irq,2-3 irqaffinity=0-1"
	pass(t, r, "node-sdboot")
	got := get()
	if b := got.Status.Boot; b == nil || b.State != v1alpha1.BootStaged || b.Backend != "SystemdBoot" {
		t.Fatalf("after staging: %+v", got.Status.Boot)
	}
	if s := setting(got.Status.Settings, bootargs.SettingSystemdBoot); s == nil || s.State != v1alpha1.SettingApplied {
		t.Fatalf("boot/systemd-boot setting %+v", s)
	}
	if b, _ := os.ReadFile(root.Path(bootargs.KernelCmdline)); string(b) != "root=UUID=1234 ro quiet "+line+"\n" || ki.Count() != 1 {
		t.Fatalf("/etc/kernel/cmdline %q, kernel-install runs %d", b, ki.Count())
	}
	got.Spec.Tuning.BootParameters.Policy = v1alpha1.BootReportOnly
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	pass(t, r, "node-sdboot")
	if b, _ := os.ReadFile(root.Path(bootargs.KernelCmdline)); string(b) != orig || ki.Count() != 2 {
		t.Fatalf("report only: /etc/kernel/cmdline %q, kernel-install runs %d; want %q and 2", b, ki.Count(), orig)
	}
	if b := get().Status.Boot; b == nil || b.State != v1alpha1.BootPlanned {
		t.Errorf("report only after the revert of the staging: %+v", b)
	}
}
