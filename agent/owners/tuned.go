package owners

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/internal/settingid"
)

// profileName is what a TuneD profile name may be; anything else in
// active_profile is refused before a path is built from it.
var profileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// profileDirs are where TuneD looks for a profile, user profiles first.
var profileDirs = [][]string{
	{"etc", "tuned"}, {"etc", "tuned", "profiles"},
	{"usr", "lib", "tuned"}, {"usr", "lib", "tuned", "profiles"},
}

// tuned records a running TuneD with an active profile: it owns the
// sysctls its profile sets ([sysctl]), the CPUs' governor and idle states
// ([cpu] governor, force_latency), IRQ affinity when its scheduler plugin
// isolates cores ([scheduler] isolated_cores) and the kernel command line
// ([bootloader] cmdline). A TuneD without an active profile tunes nothing.
func (s *Set) tuned(root *host.Root, pid int) {
	path := root.Path("etc", "tuned", "active_profile")
	b, err := readBounded(path, maxProcFile)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		s.Errs = append(s.Errs, err)
		return
	}
	names := strings.Fields(b)
	if len(names) == 0 {
		return
	}
	o := Owner{Kind: TuneD, Name: fmt.Sprintf("tuned (pid %d, profile %s)", pid, strings.Join(names, " ")),
		Instead: fmt.Sprintf("set it in the TuneD profile (%s; with NTO, its PerformanceProfile or Tuned object), or take it out of that profile so the LatencyProfile tunes it", strings.Join(names, " "))}
	s.Running = append(s.Running, o)
	p := tunedProfile{}
	for _, n := range names {
		if err := p.load(root, n, 0, map[string]bool{}); err != nil {
			s.Errs = append(s.Errs, err)
		}
	}
	c := Claim{Owner: o, Sysctls: p.sysctls, Why: "its active profile sets it"}
	if p.governor {
		c.Scopes = append(c.Scopes, powerGovernor...)
	}
	if p.latency {
		c.Scopes = append(c.Scopes, powerIdle...)
	}
	if p.isolates {
		c.Scopes = append(c.Scopes, settingid.IRQ.Name)
	}
	if p.cmdline {
		c.Scopes = append(c.Scopes, settingid.Boot.Name)
	}
	if len(c.Scopes) > 0 || len(c.Sysctls) > 0 {
		s.Claims = append(s.Claims, c)
	}
}

// The power settings TuneD's cpu plugin writes (power/cpu<N>/governor,
// power/cpu<N>/idle-state<K>/disable, power/cpu<N>/resume-latency, and a
// class's power/<class>/governor).
var (
	powerGovernor = []string{settingid.Power.Name + "/*/governor"}
	powerIdle     = []string{settingid.Power.Name + "/*/idle-state*", settingid.Power.Name + "/*/resume-latency"}
)

// tunedProfile is what a profile and its includes set.
type tunedProfile struct {
	sysctls                              []string
	governor, latency, isolates, cmdline bool
}

// load reads profile name (and what it includes, depth first, at most
// maxIncludes deep) from the first directory that has it.
func (p *tunedProfile) load(root *host.Root, name string, depth int, seen map[string]bool) error {
	if !profileName.MatchString(name) {
		return fmt.Errorf("%s: profile name %q is not a TuneD profile name; not read", root.Path("etc", "tuned", "active_profile"), name)
	}
	if seen[name] {
		return nil
	}
	seen[name] = true
	if depth > maxIncludes {
		return fmt.Errorf("TuneD profile %s: includes nested deeper than %d; the rest not read", name, maxIncludes)
	}
	var text, path string
	for _, d := range profileDirs {
		path = root.Path(append(slices.Clone(d), name, "tuned.conf")...)
		b, err := readBounded(path, maxConfigFile)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		text = b
		break
	}
	if text == "" {
		return fmt.Errorf("TuneD profile %s: no tuned.conf under /etc/tuned or /usr/lib/tuned", name)
	}
	var errs []error
	section := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.TrimSpace(line[1 : len(line)-1])
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch {
		case section == "main" && key == "include":
			for _, inc := range strings.Split(val, ",") {
				if inc = strings.TrimSpace(inc); inc != "" && !strings.Contains(inc, "$") {
					errs = append(errs, p.load(root, inc, depth+1, seen))
				}
			}
		case section == "sysctl":
			p.sysctls = append(p.sysctls, strings.ReplaceAll(key, "/", "."))
		case section == "cpu" && key == "governor":
			p.governor = true
		case section == "cpu" && (key == "force_latency" || key == "pm_qos_resume_latency_us"):
			p.latency = true
		case section == "scheduler" && key == "isolated_cores":
			p.isolates = true
		case section == "bootloader" && strings.HasPrefix(key, "cmdline"):
			p.cmdline = true
		}
	}
	return errors.Join(errs...)
}
