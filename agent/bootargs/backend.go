package bootargs

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"latencytier.io/latencytier/agent/host"
)

// Kind is how a node's bootloader takes kernel arguments.
type Kind string

const (
	// KindGRUB: Debian-style GRUB, a drop-in in /etc/default/grub.d and
	// update-grub regenerating /boot/grub/grub.cfg.
	KindGRUB Kind = "GRUB"
	// KindBLS: Boot Loader Specification entries edited with grubby
	// (Fedora, RHEL and their kin).
	KindBLS Kind = "BLS"
	// KindSystemdBoot: /etc/kernel/cmdline and kernel-install.
	KindSystemdBoot Kind = "systemd-boot"
	// KindUnsupported: the arguments come from somewhere this agent does
	// not and should not write (an image, a signed UKI, a machine config).
	KindUnsupported Kind = "Unsupported"
)

// Backend is what Detect found.
type Backend struct {
	Kind Kind
	// Name is what status.boot.backend says: GRUB, BLS, SystemdBoot, or
	// the image-based system (Ostree, Talos, Flatcar, Bottlerocket, UKI),
	// None when no bootloader configuration was found.
	Name string
	// Reason says why (for Unsupported: what to do instead).
	Reason string
}

// Detect finds the node's boot backend from files under root (the host's
// filesystem as the agent sees it). Image-based systems come first: their
// /etc may still hold a GRUB default file that nothing reads.
func Detect(root *host.Root) Backend {
	osID := osRelease(root)["ID"]
	switch {
	case root.Exists(root.Path("run", "ostree-booted")):
		return Backend{KindUnsupported, "Ostree", "ostree/bootc image: kernel arguments belong to the deployment (rpm-ostree kargs, bootc's kargs.d), not to the agent"}
	case osID == "talos":
		return Backend{KindUnsupported, "Talos", "Talos: kernel arguments come from the machine config (machine.install.extraKernelArgs)"}
	case osID == "flatcar" || root.IsDir(root.Path("usr", "share", "flatcar")) || root.IsDir(root.Path("etc", "flatcar")):
		return Backend{KindUnsupported, "Flatcar", "Flatcar: kernel arguments come from the OEM grub.cfg or Ignition, not from a file the agent may change"}
	case osID == "bottlerocket":
		return Backend{KindUnsupported, "Bottlerocket", "Bottlerocket: kernel arguments come from its settings API (settings.boot.kernel-parameters)"}
	case uki(root):
		return Backend{KindUnsupported, "UKI", "unified kernel image: the command line is inside the signed image; rebuild the UKI with the arguments"}
	case bootedBySystemdBoot(root):
		return systemdBoot(root)
	case root.Exists(root.Path("etc", "default", "grub")) && executable(root, "update-grub"):
		return Backend{KindGRUB, "GRUB", "Debian-style GRUB: /etc/default/grub.d drop-in, update-grub"}
	case systemdBootInstalled(root):
		return systemdBoot(root)
	case root.IsDir(root.Path("boot", "loader", "entries")) && executable(root, "grubby"):
		return Backend{KindBLS, "BLS", "Boot Loader Specification entries edited with grubby (Fedora, RHEL): this agent does not stage through grubby yet; add the arguments with grubby --update-kernel=ALL --args=... or use policy ReportOnly"}
	}
	return Backend{KindUnsupported, "None", "no bootloader configuration found (/etc/default/grub with update-grub, systemd-boot with kernel-install, or BLS entries with grubby)"}
}

// systemdBoot is the backend of a host with systemd-boot: staged when
// kernel-install and /etc/kernel/cmdline are there.
func systemdBoot(root *host.Root) Backend {
	switch {
	case !executable(root, "kernel-install"):
		return Backend{KindUnsupported, "SystemdBoot", "systemd-boot without kernel-install on the host: nothing would regenerate the entries; install systemd's kernel-install or use policy ReportOnly"}
	case !root.Exists(root.Path(KernelCmdline)):
		return Backend{KindUnsupported, "SystemdBoot", "systemd-boot without /etc/kernel/cmdline: kernel-install takes the running /proc/cmdline then, and a revert could not give the entries their line back; create /etc/kernel/cmdline with the entries' arguments"}
	}
	return Backend{KindSystemdBoot, "SystemdBoot", "systemd-boot: /etc/kernel/cmdline, kernel-install"}
}

// osRelease parses /etc/os-release (or /usr/lib/os-release).
func osRelease(root *host.Root) map[string]string {
	out := map[string]string{}
	for _, p := range []string{root.Path("etc", "os-release"), root.Path("usr", "lib", "os-release")} {
		b, err := root.ReadFile(p)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), "=")
			if ok {
				out[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
			}
		}
		return out
	}
	return out
}

// uki reports whether the running kernel came from a unified kernel image:
// systemd-stub sets the StubInfo EFI variable.
func uki(root *host.Root) bool {
	m, _ := filepath.Glob(root.Path("sys", "firmware", "efi", "efivars", "StubInfo-*"))
	return len(m) > 0
}

// executable reports whether a tool exists in the host's sbin or bin.
func executable(root *host.Root, name string) bool {
	for _, d := range []string{"usr/sbin", "usr/bin", "sbin", "bin"} {
		st, err := os.Stat(root.Path(d, name))
		if err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
