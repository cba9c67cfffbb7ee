package bootargs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/internal/settingid"
)

// The staged arguments are a knob like any other setting, so the journal,
// Apply, drift and Revert cover them: its ID is SettingGRUB, its path
// GRUBPath(profile) (not a file: the engine reads and writes it through
// Read and Write), its value the arguments as one line ("" for no drop-in).
// The drop-in is a file the agent owns whole, so its original is always
// absence (Restore gives ""): an existing file of that name that is not the
// agent's makes Read fail, and nothing is written over it.

// Prefix starts the knob path of staged boot arguments (SystemdBootPath
// for systemd-boot).
const Prefix = "bootargs:"

// SettingGRUB is the setting ID of the GRUB drop-in.
var SettingGRUB = settingid.Boot.ID("grub")

// GRUBPath is the knob path of the GRUB drop-in staged for profile.
func GRUBPath(profile string) string { return Prefix + "grub/" + profile }

// IsPath reports whether a knob or journal path names staged boot arguments.
func IsPath(p string) bool { return strings.HasPrefix(p, Prefix) }

// Access reaches the staged arguments (Read, Write; update-grub or
// kernel-install through env.Run); the journal records its entries as kind
// "bootargs". They are in files on disk, unlike every kernel value, so they
// survive a reboot and the engine keeps their entries when it drops an
// earlier boot's journal.
var Access = &knob.Access{Name: "bootargs", Claims: IsPath, SurvivesReboot: true,
	Read: func(env knob.Env, path string) (string, error) { return Read(env.Root, path) },
	Write: func(env knob.Env, path, value string) error {
		return Write(context.Background(), env.Root, path, value, env.Run)
	},
}

// RestoreAbsent is the knob's Restore: the drop-in's original is absence.
func RestoreAbsent(string) string { return "" }

func parseKnobPath(p string) (kind Kind, profile string, err error) {
	for k, pre := range map[Kind]string{KindGRUB: Prefix + "grub/", KindSystemdBoot: Prefix + "systemd-boot/"} {
		if rest, ok := strings.CutPrefix(p, pre); ok && safeName.MatchString(rest) {
			return k, rest, nil
		}
	}
	return "", "", fmt.Errorf("not a staged boot arguments path: %q", p)
}

// Read returns the arguments the agent staged, as one line ("" when there
// are none): the GRUB drop-in's (a file of that name that is not the
// agent's is an error), or those it added to /etc/kernel/cmdline.
func Read(root *host.Root, path string) (string, error) {
	kind, _, err := parseKnobPath(path)
	if err != nil {
		return "", err
	}
	var args []Arg
	if kind == KindSystemdBoot {
		args, err = SystemdBoot{Root: root}.Staged()
	} else {
		args, err = GRUB{Root: root}.Staged()
	}
	if err != nil {
		return "", err
	}
	return Line(args), nil
}

// Write stages value (an argument line) through the drop-in and update-grub,
// or, for "", removes the drop-in and runs update-grub again. Before the
// first stage it keeps a copy of the generated grub.cfg in the agent's
// state directory (GRUBCfgOriginal); a revert that regenerates it
// differently says so in its error, naming both files. A failed update-grub
// takes the drop-in back out, so the setting reads as not staged and the
// next pass tries again instead of finding it "applied". On systemd-boot
// it stages through /etc/kernel/cmdline and kernel-install (SystemdBoot).
func Write(ctx context.Context, root *host.Root, path, value string, run RunFunc) error {
	kind, profile, err := parseKnobPath(path)
	if err != nil {
		return err
	}
	if kind == KindSystemdBoot {
		sb := SystemdBoot{Root: root, Run: run}
		if value == "" {
			_, err := sb.Revert(ctx)
			return err
		}
		_, err := sb.Stage(ctx, Parse(value))
		return err
	}
	g := GRUB{Root: root, Run: run}
	if value == "" {
		if _, err := g.Revert(ctx); err != nil {
			return err
		}
		return compareOriginal(root)
	}
	args := Parse(value)
	if err := check(args); err != nil {
		return err
	}
	staged, err := g.Staged()
	if err != nil {
		return err
	}
	if staged == nil {
		if err := keepOriginal(root); err != nil {
			return err
		}
	}
	if _, err := g.Stage(ctx, args, profile); err != nil {
		var ce *ConflictError
		if staged == nil && !errors.As(err, &ce) && root.Exists(root.Path(DropIn)) {
			// update-grub failed: no half-staged drop-in stays behind.
			if rmErr := os.Remove(root.Path(DropIn)); rmErr == nil {
				err = fmt.Errorf("%w (drop-in removed again)", err)
			}
		}
		return err
	}
	return nil
}

// GRUBCfg is the configuration update-grub generates, relative to the root.
const GRUBCfg = "boot/grub/grub.cfg"

// GRUBCfgOriginal is the copy of GRUBCfg taken before the agent first
// staged, in its state directory.
const GRUBCfgOriginal = "grub.cfg.before-latencytier"

func originalPath(root *host.Root) string { return filepath.Join(root.StateDir(), GRUBCfgOriginal) }

// keepOriginal copies grub.cfg into the state directory unless a copy is
// there already (an earlier stage this node has not reverted yet: that copy
// is the original). No grub.cfg (never generated) keeps nothing.
func keepOriginal(root *host.Root) error {
	if root.Exists(originalPath(root)) {
		return nil
	}
	b, err := root.ReadFile(root.Path(GRUBCfg))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("keep the original %s before staging: %w", "/"+GRUBCfg, err)
	}
	return root.WriteOwn(GRUBCfgOriginal, b)
}

// compareOriginal checks, after a revert, that update-grub regenerated
// grub.cfg byte for byte as it was before the first stage, and drops the
// copy. A difference (a kernel installed or a default file edited since) is
// not a failed revert (the drop-in is gone and the distribution's tools
// made the file): the copy moves to GRUBCfgDiffers, which Mismatch reports
// until a person removes it, and the next stage keeps a fresh copy.
func compareOriginal(root *host.Root) error {
	orig, err := root.ReadOwn(originalPath(root))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	now, err := root.ReadFile(root.Path(GRUBCfg))
	if err != nil {
		return fmt.Errorf("read %s after revert: %w", "/"+GRUBCfg, err)
	}
	if !bytes.Equal(orig, now) {
		return os.Rename(originalPath(root), filepath.Join(root.StateDir(), GRUBCfgDiffers))
	}
	return os.Remove(originalPath(root))
}

// GRUBCfgDiffers is where compareOriginal moves the copy of a grub.cfg the
// revert did not regenerate byte for byte.
const GRUBCfgDiffers = GRUBCfgOriginal + ".differs"

// Mismatch says, when the last revert regenerated grub.cfg differently from
// before staging, which file holds the earlier one ("" otherwise).
func Mismatch(root *host.Root) string {
	p := filepath.Join(root.StateDir(), GRUBCfgDiffers)
	if !root.Exists(p) {
		return ""
	}
	return fmt.Sprintf("/%s after the last revert differs from before staging (kernels or GRUB defaults changed since?); the earlier one is %s", GRUBCfg, strings.TrimPrefix(p, root.Dir()))
}

// Generated reports whether grub.cfg has a kernel ("linux") line ending in
// args, as update-grub writes the drop-in's arguments; known is false when
// grub.cfg cannot be read (the agent sees no /boot).
func Generated(root *host.Root, args []Arg) (holds, known bool) {
	b, err := root.ReadFile(root.Path(GRUBCfg))
	if err != nil {
		return false, false
	}
	want := " " + Line(args)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && (f[0] == "linux" || f[0] == "linuxefi") && strings.HasSuffix(strings.TrimSpace(l), want) {
			return true, true
		}
	}
	return false, true
}
