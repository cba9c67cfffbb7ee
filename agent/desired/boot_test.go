package desired

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/bootargs/bootargstest"
	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func bootTuning(reserved, isolated string, policy v1alpha1.BootPolicy) v1alpha1.TuningSpec {
	t := v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{}}
	if reserved != "" {
		t.CPUs.Reserved = ptr.To(reserved)
	}
	if isolated != "" {
		t.CPUs.Isolated = ptr.To(isolated)
	}
	if policy != "" {
		t.BootParameters = &v1alpha1.BootParametersSpec{Policy: policy}
	}
	return t
}

const fullArgs = "BOOT_IMAGE=/vmlinuz ro nohz_full=2-3 rcu_nocbs=2-3 isolcpus=managed_irq,2-3 irqaffinity=0-1"

// TestPlanBoot covers every state a plan takes on a temp-dir host root, and
// that a plan with no stageable backend writes nothing.
func TestPlanBoot(t *testing.T) {
	debian := bootargstest.Files("quiet")
	cases := []struct {
		name    string
		files   map[string]string
		tuning  v1alpha1.TuningSpec
		state   v1alpha1.BootState
		backend string
		knob    bool
		hold    bool
		message string
		present int
	}{
		{name: "nothing isolated", files: debian, tuning: bootTuning("0-1", "", v1alpha1.BootReboot),
			state: v1alpha1.BootNotNeeded, backend: "GRUB", message: "no boot parameter"},
		{name: "report only: the plan, nothing staged", files: debian, tuning: bootTuning("0-1", "2-3", ""),
			state: v1alpha1.BootPlanned, backend: "GRUB", message: "add to the kernel command line and reboot: nohz_full=2-3 rcu_nocbs=2-3 isolcpus=managed_irq,2-3 irqaffinity=0-1"},
		{name: "report only, already booted with them", files: with(debian, "proc/cmdline", fullArgs), tuning: bootTuning("0-1", "2-3", v1alpha1.BootReportOnly),
			state: v1alpha1.BootBooted, backend: "GRUB", present: 4},
		{name: "reboot on GRUB: a knob", files: debian, tuning: bootTuning("0-1", "2-3", v1alpha1.BootReboot),
			state: v1alpha1.BootStaged, backend: "GRUB", knob: true},
		{name: "reboot on talos: unsupported", files: map[string]string{"etc/os-release": "ID=talos\n"}, tuning: bootTuning("0-1", "2-3", v1alpha1.BootReboot),
			state: v1alpha1.BootUnsupported, backend: "Talos", message: "machine config"},
		{name: "reboot on BLS: not staged by this agent", files: map[string]string{"boot/loader/entries/a.conf": "x", "usr/sbin/grubby": "x"}, tuning: bootTuning("0-1", "2-3", v1alpha1.BootReboot),
			state: v1alpha1.BootUnsupported, backend: "BLS", message: "does not stage through grubby yet"},
		{name: "reboot on systemd-boot: a knob", files: sdboot("root=/dev/vda ro"), tuning: bootTuning("0-1", "2-3", v1alpha1.BootReboot),
			state: v1alpha1.BootStaged, backend: "SystemdBoot", knob: true},
		{name: "reboot on systemd-boot without /etc/kernel/cmdline: unsupported", files: map[string]string{"boot/efi/loader/loader.conf": "", "usr/bin/kernel-install": "x"}, tuning: bootTuning("0-1", "2-3", v1alpha1.BootReboot),
			state: v1alpha1.BootUnsupported, backend: "SystemdBoot", message: "create /etc/kernel/cmdline"},
		{name: "someone else's irqaffinity in /etc/kernel/cmdline", files: sdboot("root=/dev/vda irqaffinity=0"), tuning: bootTuning("0-1", "2-3", v1alpha1.BootReboot),
			state: v1alpha1.BootConflict, backend: "SystemdBoot", hold: true, message: "irqaffinity=0 in /etc/kernel/cmdline, not irqaffinity=0-1"},
		{name: "reboot on flatcar: unsupported", files: with(debian, "usr/share/flatcar/release", "x"), tuning: bootTuning("0-1", "2-3", v1alpha1.BootReboot),
			state: v1alpha1.BootUnsupported, backend: "Flatcar", message: "Ignition"},
		{name: "reboot on ostree: unsupported", files: with(debian, "run/ostree-booted", ""), tuning: bootTuning("0-1", "2-3", v1alpha1.BootReboot),
			state: v1alpha1.BootUnsupported, backend: "Ostree", message: "kargs"},
		{name: "someone else's nohz_full on the running kernel", files: with(debian, "proc/cmdline", "ro nohz_full=1-3"), tuning: bootTuning("0-1", "2-3", v1alpha1.BootReboot),
			state: v1alpha1.BootConflict, backend: "GRUB", hold: true, message: "nohz_full=1-3 in /proc/cmdline, not nohz_full=2-3"},
		{name: "someone else's rcu_nocbs in a GRUB file", files: with(debian, "etc/default/grub.d/50-x.cfg", `GRUB_CMDLINE_LINUX="rcu_nocbs=3"`), tuning: bootTuning("0-1", "2-3", v1alpha1.BootReboot),
			state: v1alpha1.BootConflict, backend: "GRUB", hold: true, message: "rcu_nocbs=3 in /etc/default/grub.d/50-x.cfg GRUB_CMDLINE_LINUX"},
		{name: "isolated CPUs this node lacks", files: debian, tuning: bootTuning("0-1", "2-7", v1alpha1.BootReboot),
			state: v1alpha1.BootFailed, hold: true, message: "cpus.isolated 2-7: CPUs 4-7 are not online"},
		{name: "isolated without reserved", files: debian, tuning: bootTuning("", "2-3", v1alpha1.BootReboot),
			state: v1alpha1.BootFailed, hold: true, message: "cpus.reserved: required"},
		{name: "not a cpulist", files: debian, tuning: bootTuning("0-1", "2-x", v1alpha1.BootReboot),
			state: v1alpha1.BootFailed, hold: true, message: `cpus.isolated "2-x": not a cpulist`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := with(c.files, "sys/devices/system/cpu/online", "0-3")
			if _, ok := files["proc/cmdline"]; !ok {
				files["proc/cmdline"] = "BOOT_IMAGE=/vmlinuz ro quiet"
			}
			files["proc/stat"] = "cpu 1 2 3\nbtime 1700000000\n"
			root := testroot.New(t, files)
			if files["usr/sbin/grubby"] != "" {
				chmodX(t, root.Path("usr/sbin/grubby"))
			}
			if files["usr/bin/kernel-install"] != "" {
				chmodX(t, root.Path("usr/bin/kernel-install"))
			}
			if files["usr/sbin/update-grub"] != "" {
				chmodX(t, root.Path("usr/sbin/update-grub"))
			}
			snap := snapshot(t, root.Dir())
			b := PlanBoot(root, c.tuning, "trading", nil)
			st := b.Status
			if st.State != c.state || st.Backend != c.backend || (b.Knob != nil) != c.knob || b.Hold != c.hold || !strings.Contains(st.Message, c.message) {
				t.Fatalf("got state %s backend %q knob %v hold %v message %q", st.State, st.Backend, b.Knob != nil, b.Hold, st.Message)
			}
			n := 0
			for _, a := range st.Arguments {
				if a.Present {
					n++
				}
				if a.Why == "" {
					t.Errorf("argument %s without why", a.Argument)
				}
			}
			if n != c.present {
				t.Errorf("%d arguments present, want %d (%+v)", n, c.present, st.Arguments)
			}
			// Every state, NotNeeded and Failed too: the manager's gate
			// lifts the tuning-pending taint only on an Applied of the
			// node's current boot (make test-e2e kept a node tainted for
			// good when NotNeeded carried no boot id).
			if st.BootID == "" || st.BootedAt == nil || st.BootedAt.Unix() != 1700000000 {
				t.Errorf("boot id %q bootedAt %v", st.BootID, st.BootedAt)
			}
			if c.knob && (b.Knob.ID != map[string]string{"GRUB": bootargs.SettingGRUB, "SystemdBoot": bootargs.SettingSystemdBoot}[c.backend] || b.Knob.Desired != "nohz_full=2-3 rcu_nocbs=2-3 isolcpus=managed_irq,2-3 irqaffinity=0-1" || b.Knob.RestoreValue("x") != "") {
				t.Errorf("knob %+v", b.Knob)
			}
			if after := snapshot(t, root.Dir()); !maps.Equal(snap, after) {
				t.Errorf("planning wrote to the host: before %v after %v", snap, after)
			}
		})
	}
}

// The agent's own earlier revision on the running kernel is no conflict.
func TestPlanBootOwnEarlierRevision(t *testing.T) {
	files := with(bootargstest.Files(""), "proc/cmdline", "ro nohz_full=3 rcu_nocbs=3 isolcpus=managed_irq,3 irqaffinity=0-2")
	files["sys/devices/system/cpu/online"] = "0-3"
	root := testroot.New(t, files)
	chmodX(t, root.Path("usr/sbin/update-grub"))
	b := PlanBoot(root, bootTuning("0-1", "2-3", v1alpha1.BootReboot), "trading", []string{"nohz_full=3 rcu_nocbs=3 isolcpus=managed_irq,3 irqaffinity=0-2"})
	if b.Status.State != v1alpha1.BootStaged || b.Knob == nil {
		t.Fatalf("%+v", b.Status)
	}
	if b := PlanBoot(root, bootTuning("0-1", "2-3", v1alpha1.BootReboot), "trading", nil); b.Status.State != v1alpha1.BootConflict {
		t.Errorf("without the journal's lines: %s, want Conflict", b.Status.State)
	}
}

func chmodX(t *testing.T, p string) {
	t.Helper()
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

// snapshot is every file under dir with its content and mode.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := info.Mode().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func with(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	out[k] = v
	return out
}

// sdboot is a systemd-boot host: loader.conf on the ESP, kernel-install,
// /etc/kernel/cmdline holding cmdline.
func sdboot(cmdline string) map[string]string {
	return map[string]string{"boot/efi/loader/loader.conf": "timeout 3\n", "usr/bin/kernel-install": "#!/bin/sh\n",
		"etc/kernel/cmdline": cmdline + "\n", "etc/os-release": "ID=arch\n"}
}

// TestPlanBootPerNodeShape: one profile on two node shapes, an 8-CPU and a
// 4-CPU node. Each agent checks the profile's CPU lists against its own
// node's online CPUs (sysfs, read per pass) before it renders anything: a
// profile both shapes hold stages the same arguments on both; one that
// names CPUs only the larger node has stages them there and fails on the
// smaller node alone, naming the field and the CPUs it lacks, with no knob
// and nothing written (never a partial isolation: the cpuset, IRQ and power
// settings refuse CPUs a node lacks the same way).
func TestPlanBootPerNodeShape(t *testing.T) {
	shapes := map[string]string{"8-cpu": "0-7", "4-cpu": "0-3"}
	for _, c := range []struct {
		name               string
		reserved, isolated string
		want               map[string]string // shape -> staged line, or "Failed: <message part>"
	}{
		{"fits both", "0-1", "2-3", map[string]string{
			"8-cpu": "nohz_full=2-3 rcu_nocbs=2-3 isolcpus=managed_irq,2-3 irqaffinity=0-1",
			"4-cpu": "nohz_full=2-3 rcu_nocbs=2-3 isolcpus=managed_irq,2-3 irqaffinity=0-1"}},
		{"isolated beyond the small node", "0-1", "2-7", map[string]string{
			"8-cpu": "nohz_full=2-7 rcu_nocbs=2-7 isolcpus=managed_irq,2-7 irqaffinity=0-1",
			"4-cpu": "Failed: cpus.isolated 2-7: CPUs 4-7 are not online on this node (online 0-3)"}},
		{"reserved beyond the small node", "4", "1-3", map[string]string{
			"8-cpu": "nohz_full=1-3 rcu_nocbs=1-3 isolcpus=managed_irq,1-3 irqaffinity=4",
			"4-cpu": "Failed: cpus.reserved 4: CPUs 4 are not online on this node (online 0-3)"}},
	} {
		for shape, online := range shapes {
			t.Run(c.name+"/"+shape, func(t *testing.T) {
				files := with(bootargstest.Files("quiet"), "sys/devices/system/cpu/online", online)
				files["proc/cmdline"] = "BOOT_IMAGE=/vmlinuz ro quiet"
				files["proc/stat"] = "cpu 1 2 3\nbtime 1700000000\n"
				root := testroot.New(t, files)
				chmodX(t, root.Path("usr/sbin/update-grub"))
				before := snapshot(t, root.Dir())
				b := PlanBoot(root, bootTuning(c.reserved, c.isolated, v1alpha1.BootReboot), "mixed", nil)
				want := c.want[shape]
				if msg, failed := strings.CutPrefix(want, "Failed: "); failed {
					if b.Status.State != v1alpha1.BootFailed || b.Knob != nil || !strings.Contains(b.Status.Message, msg) {
						t.Fatalf("state %s knob %v message %q, want Failed with %q", b.Status.State, b.Knob != nil, b.Status.Message, msg)
					}
				} else if b.Status.State != v1alpha1.BootStaged || b.Knob == nil || b.Knob.Desired != want {
					t.Fatalf("state %s knob %+v, want Staged with %q", b.Status.State, b.Knob, want)
				}
				if after := snapshot(t, root.Dir()); !maps.Equal(before, after) {
					t.Errorf("planning wrote to the host")
				}
			})
		}
	}
}
