package bootargs

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"latencytier.io/latencytier/agent/host"
)

// DropIn is the GRUB drop-in the agent owns, relative to the host root.
// update-grub sources /etc/default/grub, then /etc/default/grub.d/*.cfg in
// order; 90- puts ours after the distribution's own.
const DropIn = "etc/default/grub.d/90-latencytier.cfg"

// dropInVar is the variable the drop-in extends: GRUB_CMDLINE_LINUX_DEFAULT
// reaches the normal entries only, so a recovery boot comes up without the
// isolation (a way back if an argument breaks the node).
const dropInVar = "GRUB_CMDLINE_LINUX_DEFAULT"

const dropInHeader = "# Kernel arguments staged by the latencytier agent"

// safeName is what a profile name (a DNS subdomain) may contain in the
// drop-in's comment.
var safeName = regexp.MustCompile(`^[a-z0-9.-]{1,253}$`)

// RenderGRUB is the drop-in for args, staged for profile.
func RenderGRUB(args []Arg, profile string) (string, error) {
	if err := check(args); err != nil {
		return "", err
	}
	if !safeName.MatchString(profile) {
		return "", fmt.Errorf("profile %q: not a profile name", profile)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s for profile %s.\n", dropInHeader, profile)
	b.WriteString("# Removed when the profile is reverted; the agent re-asserts it, so edit the profile, not this file.\n")
	fmt.Fprintf(&b, "%s=\"${%s:+$%s }%s\"\n", dropInVar, dropInVar, dropInVar, Line(args))
	return b.String(), nil
}

// ParseGRUB reads back the arguments of a drop-in RenderGRUB wrote; an error
// means the file is not (or no longer) ours as written.
func ParseGRUB(content string) ([]Arg, error) {
	if !strings.HasPrefix(content, dropInHeader) {
		return nil, fmt.Errorf("%s: does not start with the agent's header", DropIn)
	}
	prefix := fmt.Sprintf("%s=\"${%s:+$%s }", dropInVar, dropInVar, dropInVar)
	for _, l := range strings.Split(content, "\n") {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			line, ok := strings.CutSuffix(rest, `"`)
			if !ok {
				return nil, fmt.Errorf("%s: unterminated %s", DropIn, dropInVar)
			}
			args := Parse(line)
			if err := check(args); err != nil {
				return nil, fmt.Errorf("%s: %w", DropIn, err)
			}
			return args, nil
		}
	}
	return nil, fmt.Errorf("%s: no %s line", DropIn, dropInVar)
}

// cmdlineVar matches a GRUB_CMDLINE_LINUX or GRUB_CMDLINE_LINUX_DEFAULT
// assignment in a GRUB default file.
var cmdlineVar = regexp.MustCompile(`^\s*(?:export\s+)?(GRUB_CMDLINE_LINUX(?:_DEFAULT)?)=(.*)$`)

// GRUBSources are the kernel arguments other GRUB default files set, as
// (file, arguments) for Conflicts: /etc/default/grub and every
// /etc/default/grub.d/*.cfg but the agent's own. References to the
// variables themselves ($GRUB_CMDLINE_LINUX...) are dropped: they add
// nothing of their own.
func GRUBSources(root *host.Root) ([][2]string, error) {
	files := []string{root.Path("etc", "default", "grub")}
	more, err := filepath.Glob(root.Path("etc", "default", "grub.d", "*.cfg"))
	if err != nil {
		return nil, err
	}
	sort.Strings(more)
	own := root.Path(DropIn)
	for _, f := range more {
		if f != own {
			files = append(files, f)
		}
	}
	var out [][2]string
	for _, f := range files {
		b, err := root.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			m := cmdlineVar.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			v := strings.TrimSpace(m[2])
			v = strings.Trim(v, `"'`)
			var keep []string
			for _, f := range fields(v) {
				if !strings.Contains(f, "$") {
					keep = append(keep, f)
				}
			}
			out = append(out, [2]string{strings.TrimPrefix(f, root.Dir()) + " " + m[1], strings.Join(keep, " ")})
		}
	}
	return out, nil
}
