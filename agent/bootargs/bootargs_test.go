package bootargs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/internal/testroot"
)

func set(s string) cpuset.CPUSet { c, _ := cpuset.Parse(s); return c }

func TestDerive(t *testing.T) {
	online := set("0-7")
	cases := []struct {
		name               string
		reserved, isolated string
		x                  Extras
		want, err          string
	}{
		{name: "nothing isolated", reserved: "0", isolated: ""},
		{name: "isolated", reserved: "0-1", isolated: "2-7",
			want: "nohz_full=2-7 rcu_nocbs=2-7 isolcpus=managed_irq,2-7 irqaffinity=0-1"},
		{name: "extras", reserved: "0", isolated: "4,6", x: Extras{SkewTick: true, MaxCState: ptr.To[int32](1)},
			want: "nohz_full=4,6 rcu_nocbs=4,6 isolcpus=managed_irq,4,6 irqaffinity=0 skew_tick=1 processor.max_cstate=1 intel_idle.max_cstate=1"},
		{name: "extras alone", reserved: "0", x: Extras{SkewTick: true}, want: "skew_tick=1"},
		{name: "isolated offline", reserved: "0", isolated: "6-9", err: "cpus.isolated 6-9: CPUs 8-9 are not online"},
		{name: "no housekeeping", isolated: "2-7", err: "cpus.reserved: required"},
		{name: "reserved offline", reserved: "12", isolated: "2", err: "cpus.reserved 12: CPUs 12 are not online"},
		{name: "overlap", reserved: "0-2", isolated: "2-7", err: "overlap on 2"},
		{name: "c-state out of range", reserved: "0", isolated: "2", x: Extras{MaxCState: ptr.To[int32](42)}, err: "boot.maxCState 42"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args, err := Derive(online, set(c.reserved), set(c.isolated), c.x)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := Line(args); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
			for _, a := range args {
				if a.Why == "" {
					t.Errorf("%s has no reason", a)
				}
			}
		})
	}
}

func TestParse(t *testing.T) {
	got := Line(bare(Parse(`BOOT_IMAGE=/vmlinuz root=UUID=x ro  quiet dyndbg="file a.c +p" isolcpus=managed_irq,2-3 -- nohz_full=9`)))
	want := `BOOT_IMAGE=/vmlinuz root=UUID=x ro quiet dyndbg=file a.c +p isolcpus=managed_irq,2-3`
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestRenderParseGRUB(t *testing.T) {
	args, err := Derive(set("0-3"), set("0"), set("2-3"), Extras{SkewTick: true})
	if err != nil {
		t.Fatal(err)
	}
	text, err := RenderGRUB(args, "trading")
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseGRUB(text)
	if err != nil {
		t.Fatal(err)
	}
	if Line(back) != Line(args) {
		t.Errorf("round trip: %q, want %q\n%s", Line(back), Line(args), text)
	}
	// The fragment is shell: update-grub sources it. Source it after the
	// distribution's own value and check the result.
	f := filepath.Join(t.TempDir(), "90-latencytier.cfg")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ before, want string }{
		{"quiet splash", "quiet splash " + Line(args)},
		{"", Line(args)},
	} {
		out, err := exec.Command("sh", "-c", `GRUB_CMDLINE_LINUX_DEFAULT="$1"; . "$2"; printf %s "$GRUB_CMDLINE_LINUX_DEFAULT"`, "sh", c.before, f).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != c.want {
			t.Errorf("sourced after %q: %q, want %q", c.before, out, c.want)
		}
	}
}

// TestRenderRefusesUnsafe: nothing a shell would interpret reaches the
// drop-in, whatever an Arg holds.
func TestRenderRefusesUnsafe(t *testing.T) {
	for _, a := range []Arg{
		{Key: "nohz_full", Value: `2"; reboot; "`},
		{Key: "nohz_full", Value: "$(id)"},
		{Key: "x y", Value: "1"},
		{Key: "nohz_full", Value: "1\nGRUB_TIMEOUT=0"},
	} {
		if _, err := RenderGRUB([]Arg{a}, "p"); err == nil {
			t.Errorf("rendered %q", a.String())
		}
	}
	if _, err := RenderGRUB(nil, "p\nGRUB_TIMEOUT=0"); err == nil {
		t.Error("rendered a profile name with a newline")
	}
	if _, err := ParseGRUB("GRUB_CMDLINE_LINUX_DEFAULT=\"x\"\n"); err == nil {
		t.Error("parsed a file without the agent's header as ours")
	}
}

func TestConflicts(t *testing.T) {
	want, _ := Derive(set("0-7"), set("0-1"), set("4-7"), Extras{})
	ours := []Arg{{Key: "nohz_full", Value: "2-7"}, {Key: "rcu_nocbs", Value: "2-7"}}
	got := Conflicts(want, ours,
		[2]string{"/proc/cmdline", "ro quiet nohz_full=2-7 rcu_nocbs=2-7"}, // our previous revision
		[2]string{"/etc/default/grub GRUB_CMDLINE_LINUX", "irqaffinity=0 isolcpus=managed_irq,4-7"},
	)
	if len(got) != 1 || got[0].String() != "irqaffinity=0 in /etc/default/grub GRUB_CMDLINE_LINUX, not irqaffinity=0-1" {
		t.Errorf("conflicts %v", got)
	}
}

func TestGRUBSources(t *testing.T) {
	root := testroot.Files(t, map[string]string{
		"etc/default/grub":                      "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"console=ttyS0 nohz_full=1\"\n",
		"etc/default/grub.d/50-cloud.cfg":       "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT rcu_nocbs=3\"\n",
		"etc/default/grub.d/90-latencytier.cfg": "# ours\nGRUB_CMDLINE_LINUX_DEFAULT=\"nohz_full=2\"\n",
	})
	src, err := GRUBSources(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range src {
		got = append(got, s[0]+": "+s[1])
	}
	want := []string{
		"/etc/default/grub GRUB_CMDLINE_LINUX_DEFAULT: quiet",
		"/etc/default/grub GRUB_CMDLINE_LINUX: console=ttyS0 nohz_full=1",
		"/etc/default/grub.d/50-cloud.cfg GRUB_CMDLINE_LINUX_DEFAULT: rcu_nocbs=3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDetect(t *testing.T) {
	exe := "#!/bin/sh\n"
	cases := []struct {
		name  string
		files map[string]string
		want  Kind
		why   string
	}{
		{"debian grub", map[string]string{"etc/default/grub": "", "usr/sbin/update-grub": exe, "etc/os-release": "ID=debian\n"}, KindGRUB, "update-grub"},
		{"bls", map[string]string{"boot/loader/entries/a.conf": "", "usr/sbin/grubby": exe}, KindBLS, "grubby"},
		{"systemd-boot loader.conf on /boot/efi", map[string]string{"boot/efi/loader/loader.conf": "", "etc/kernel/cmdline": "root=x", "usr/bin/kernel-install": exe}, KindSystemdBoot, "kernel-install"},
		{"systemd-boot EFI binary on /efi", map[string]string{"efi/EFI/systemd/systemd-bootx64.efi": "x", "etc/kernel/cmdline": "root=x", "usr/bin/kernel-install": exe}, KindSystemdBoot, "kernel-install"},
		{"systemd-boot loader.conf on /boot", map[string]string{"boot/loader/loader.conf": "", "boot/loader/entries/a.conf": "", "usr/sbin/grubby": exe, "etc/kernel/cmdline": "root=x", "usr/bin/kernel-install": exe}, KindSystemdBoot, "kernel-install"},
		{"booted by systemd-boot, a stale GRUB beside", map[string]string{"sys/firmware/efi/efivars/LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f": "\x06\x00\x00\x00s\x00y\x00s\x00t\x00e\x00m\x00d\x00-\x00b\x00o\x00o\x00t\x00", "etc/default/grub": "", "usr/sbin/update-grub": exe, "etc/kernel/cmdline": "root=x", "usr/bin/kernel-install": exe}, KindSystemdBoot, "kernel-install"},
		{"systemd-boot without /etc/kernel/cmdline", map[string]string{"boot/efi/loader/loader.conf": "", "usr/bin/kernel-install": exe}, KindUnsupported, "create /etc/kernel/cmdline"},
		{"systemd-boot without kernel-install", map[string]string{"boot/efi/loader/loader.conf": "", "etc/kernel/cmdline": "root=x"}, KindUnsupported, "without kernel-install"},
		{"/etc/kernel/cmdline alone is no systemd-boot", map[string]string{"etc/kernel/cmdline": "root=x", "usr/bin/kernel-install": exe}, KindUnsupported, "no bootloader configuration"},
		{"flatcar by /usr/share/flatcar", map[string]string{"usr/share/flatcar/release": "", "etc/default/grub": "", "usr/sbin/update-grub": exe}, KindUnsupported, "Flatcar"},
		{"flatcar by /etc/flatcar", map[string]string{"etc/flatcar/update.conf": "", "etc/default/grub": "", "usr/sbin/update-grub": exe}, KindUnsupported, "Flatcar"},
		{"bottlerocket", map[string]string{"etc/os-release": "ID=bottlerocket\n", "etc/default/grub": "", "usr/sbin/update-grub": exe}, KindUnsupported, "settings API"},
		{"uki under systemd-boot", map[string]string{"sys/firmware/efi/efivars/StubInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f": "x", "boot/efi/loader/loader.conf": "", "etc/kernel/cmdline": "", "usr/bin/kernel-install": exe}, KindUnsupported, "unified kernel image"},
		{"ostree", map[string]string{"run/ostree-booted": "", "etc/default/grub": "", "usr/sbin/update-grub": exe}, KindUnsupported, "ostree"},
		{"talos", map[string]string{"etc/os-release": "NAME=Talos\nID=talos\n"}, KindUnsupported, "machine config"},
		{"flatcar", map[string]string{"usr/lib/os-release": "ID=flatcar\n", "etc/default/grub": "", "usr/sbin/update-grub": exe}, KindUnsupported, "Flatcar"},
		{"uki", map[string]string{"sys/firmware/efi/efivars/StubInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f": "x", "etc/kernel/cmdline": "", "usr/bin/kernel-install": exe}, KindUnsupported, "unified kernel image"},
		{"grub file without update-grub", map[string]string{"etc/default/grub": ""}, KindUnsupported, "no bootloader configuration"},
		{"nothing", map[string]string{"etc/os-release": "ID=debian\n"}, KindUnsupported, "no bootloader configuration"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := testroot.Files(t, c.files)
			for rel, content := range c.files {
				if content == exe {
					if err := os.Chmod(root.Path(rel), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
			b := Detect(root)
			if b.Kind != c.want || !strings.Contains(b.Reason, c.why) {
				t.Errorf("got %s (%s), want %s (…%s…)", b.Kind, b.Reason, c.want, c.why)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	root := testroot.Lines(t, map[string]string{
		"proc/cmdline":                     "BOOT_IMAGE=/vmlinuz ro nohz_full=2-3 rcu_nocbs=2-3",
		"proc/sys/kernel/random/boot_id":   "b1",
		"sys/devices/system/cpu/isolated":  "",
		"sys/devices/system/cpu/nohz_full": "2-3",
	})
	want, _ := Derive(set("0-3"), set("0"), set("2-3"), Extras{})
	b := Check(root, want)
	if b.BootID != "b1" || strings.Join(b.Present, " ") != "nohz_full=2-3 rcu_nocbs=2-3" ||
		strings.Join(b.Missing, " ") != "isolcpus=managed_irq,2-3 irqaffinity=0" || b.NohzFull != "2-3" || b.Isolated != "" {
		t.Errorf("%+v", b)
	}
}

// TestGRUBStageRevert stages, restages and reverts on a temp root whose
// "update-grub" is recorded: the drop-in appears and goes, the tool runs
// once per change, someone else's file of the same name and conflicting
// arguments are refused before any write.
func TestGRUBStageRevert(t *testing.T) {
	root := testroot.Files(t, map[string]string{
		"etc/default/grub": "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"\"\n",
	})
	var runs []string
	g := GRUB{Root: root, Run: func(_ context.Context, unit string, argv []string) error {
		runs = append(runs, unit+" "+strings.Join(argv, " "))
		return nil
	}}
	args, _ := Derive(set("0-3"), set("0"), set("2-3"), Extras{})
	ctx := context.Background()
	if changed, err := g.Stage(ctx, args, "trading"); err != nil || !changed {
		t.Fatalf("stage: changed %v, %v", changed, err)
	}
	if got, err := g.Staged(); err != nil || Line(got) != Line(args) {
		t.Errorf("staged %q (%v), want %q", Line(got), err, Line(args))
	}
	if changed, err := g.Stage(ctx, args, "trading"); err != nil || changed {
		t.Errorf("restage of the same: changed %v, %v", changed, err)
	}
	args2, _ := Derive(set("0-3"), set("0-1"), set("2-3"), Extras{})
	if changed, err := g.Stage(ctx, args2, "trading"); err != nil || !changed {
		t.Errorf("stage of a new revision over our own: changed %v, %v", changed, err)
	}
	if changed, err := g.Revert(ctx); err != nil || !changed {
		t.Fatalf("revert: changed %v, %v", changed, err)
	}
	if root.Exists(root.Path(DropIn)) {
		t.Error("drop-in left after revert")
	}
	if changed, err := g.Revert(ctx); err != nil || changed {
		t.Errorf("second revert: changed %v, %v", changed, err)
	}
	if len(runs) != 3 || runs[0] != "latencytier-update-grub.service /usr/sbin/update-grub" {
		t.Errorf("update-grub runs %q, want 3 (stage, new revision, revert)", runs)
	}

	// Conflicts: someone set nohz_full in /etc/default/grub.
	testroot.Write(t, root.Path("etc/default/grub"), "GRUB_CMDLINE_LINUX=\"nohz_full=1-3\"\n")
	runs = nil
	var ce *ConflictError
	if _, err := g.Stage(ctx, args, "trading"); !errors.As(err, &ce) || !strings.Contains(err.Error(), "nohz_full=1-3 in /etc/default/grub GRUB_CMDLINE_LINUX") {
		t.Errorf("stage over a conflicting argument: %v", err)
	}
	if root.Exists(root.Path(DropIn)) || len(runs) != 0 {
		t.Errorf("a refused stage wrote (drop-in %v, runs %q)", root.Exists(root.Path(DropIn)), runs)
	}

	// Someone else's file of our name is neither overwritten nor removed.
	testroot.Write(t, root.Path("etc/default/grub"), "")
	testroot.Write(t, root.Path(DropIn), "GRUB_TIMEOUT=1\n")
	if _, err := g.Stage(ctx, args, "trading"); err == nil || !strings.Contains(err.Error(), "not the agent's") {
		t.Errorf("stage over a foreign file: %v", err)
	}
	if _, err := g.Revert(ctx); err == nil {
		t.Error("revert removed a foreign file")
	}
	if b := testroot.Read(t, root.Path(DropIn)); b != "GRUB_TIMEOUT=1" {
		t.Errorf("foreign file now %q", b)
	}
}
