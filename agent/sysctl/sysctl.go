// Package sysctl maps the typed scheduler intent (spec.tuning.scheduler) and
// the raw sysctls (spec.tuning.sysctls) to knobs on the running kernel. It
// probes where each knob lives instead of trusting the kernel version:
// /proc/sys/kernel/sched_* up to 5.12, debugfs /sys/kernel/debug/sched/* from
// 5.13, base_slice_ns on EEVDF (6.6+), where latency and wakeup granularity
// no longer exist and are reported Unsupported.
package sysctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// Layout is where this kernel keeps its scheduler knobs.
type Layout struct {
	// DebugfsMounted says Probe mounted debugfs to reach the sched knobs.
	DebugfsMounted bool
	// DebugfsMissing says debugfs is not mounted (and Probe did not mount it).
	DebugfsMissing bool
	// EEVDF says the kernel runs the EEVDF scheduler (6.6+).
	EEVDF bool
}

// Probe finds the layout. With mount set it mounts debugfs at the host's
// /sys/kernel/debug when the sched directory is missing there and debugfs
// is not mounted there already (up to 5.12 debugfs has no sched directory:
// the knobs are sysctls, and mounting again would stack a mount per pass).
func Probe(root *host.Root, mount bool) (Layout, error) {
	var l Layout
	if !root.Exists(root.DebugSched()) && !isDebugfs(root.Sys("kernel", "debug")) {
		switch {
		case !mount:
			l.DebugfsMissing = true
		default:
			if err := mountDebugfs(root); err != nil {
				l.DebugfsMissing = true
				l.EEVDF = eevdfByVersion(root)
				return l, err
			}
			l.DebugfsMounted = true
		}
	}
	l.EEVDF = root.Exists(root.DebugSched("base_slice_ns")) ||
		(!root.Exists(root.DebugSched()) && eevdfByVersion(root))
	return l, nil
}

func mountDebugfs(root *host.Root) error {
	dir := root.Sys("kernel", "debug")
	if !root.Exists(dir) {
		return fmt.Errorf("mount debugfs: %s does not exist", dir)
	}
	if err := syscall.Mount("debugfs", dir, "debugfs", 0, ""); err != nil {
		return fmt.Errorf("mount debugfs at %s: %w", dir, err)
	}
	// Recorded so a full revert (by this agent, a restarted one, or the
	// CLI) unmounts it; a mount the agent cannot account for is not kept.
	if err := recordDebugfsMount(root); err != nil {
		return errors.Join(fmt.Errorf("record the debugfs mount: %w", err), syscall.Unmount(dir, 0))
	}
	return nil
}

// eevdfByVersion is the fallback when debugfs cannot be probed: EEVDF
// replaced CFS in 6.6.
func eevdfByVersion(root *host.Root) bool {
	rel, err := root.ReadString(root.Proc("sys", "kernel", "osrelease"))
	if err != nil {
		return false
	}
	major, minor, ok := parseRelease(rel)
	return ok && (major > 6 || (major == 6 && minor >= 6))
}

func parseRelease(rel string) (major, minor int, ok bool) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimLeftFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return major, minor, true
}

// intent is one typed scheduler field resolved to a kernel value.
type intent struct {
	knob  knobs.Scheduler
	value string
	// invalid says why the field's value is refused ("" = it is not).
	invalid string
}

// Knobs maps the scheduler spec and raw sysctls to knobs in a stable order.
// Knobs the kernel lacks come back as Unsupported results, and raw sysctls
// the catalogue does not accept (internal/knobs: neither on its allowlist
// nor unlocked by admin, the cluster admin's list; or refused outright) as
// Invalid ones, never written: the spec is not trusted for them.
func Knobs(root *host.Root, l Layout, s *v1alpha1.SchedulerSpec, raw []v1alpha1.Sysctl, admin knobs.AdminList) ([]knob.Knob, []v1alpha1.SettingResult) {
	var out []knob.Knob
	var results []v1alpha1.SettingResult
	for _, in := range intents(s) {
		k, res := resolve(root, l, in)
		if res != nil {
			results = append(results, *res)
			continue
		}
		out = append(out, k)
	}
	managed := map[string]string{}
	for _, k := range out {
		managed[k.Path] = k.ID
	}
	for i, sc := range raw {
		k, res := rawKnob(root, i, sc, admin)
		if res == nil {
			res = duplicate(managed, k)
		}
		if res != nil {
			results = append(results, *res)
			continue
		}
		managed[k.Path] = k.ID
		out = append(out, k)
	}
	return out, results
}

// duplicate refuses a raw sysctl whose file an earlier raw sysctl (or a
// typed field, by another name) already manages: two knobs on one file
// overwrite each other on every pass.
func duplicate(managed map[string]string, k knob.Knob) *v1alpha1.SettingResult {
	owner, dup := managed[k.Path]
	if !dup {
		return nil
	}
	return &v1alpha1.SettingResult{Setting: k.ID, Desired: k.Desired, State: v1alpha1.SettingInvalid,
		Message: fmt.Sprintf("%s is already managed by %s; set it there", k.Path, owner)}
}

// intents are the set fields of s, in the catalogue's order.
func intents(s *v1alpha1.SchedulerSpec) []intent {
	if s == nil {
		return nil
	}
	values, invalid := map[string]string{}, map[string]string{}
	if s.Autogroup != nil {
		values[knobs.Autogroup.Field] = toggle(*s.Autogroup)
	}
	if s.NumaBalancing != nil {
		values[knobs.NumaBalancing.Field] = toggle(*s.NumaBalancing)
	}
	for field, d := range map[string]*metav1.Duration{knobs.MigrationCost.Field: s.MigrationCost,
		knobs.BaseSlice.Field: s.BaseSlice, knobs.Latency.Field: s.Latency, knobs.WakeupGranularity.Field: s.WakeupGranularity} {
		if d != nil {
			values[field] = ns(d.Duration)
		}
	}
	if s.RTRuntime != nil {
		v, err := rtRuntimeValue(*s.RTRuntime)
		if err != nil {
			v, invalid[knobs.RTRuntime.Field] = *s.RTRuntime, err.Error()
		}
		values[knobs.RTRuntime.Field] = v
	}
	var out []intent
	for _, k := range knobs.SchedulerKnobs {
		if v, ok := values[k.Field]; ok {
			out = append(out, intent{knob: k, value: v, invalid: invalid[k.Field]})
		}
	}
	return out
}

// rtRuntimeValue converts "Unlimited" or a duration to sched_rt_runtime_us,
// within the bounds the CRD holds it to (v1alpha1.RTRuntimeMin to
// RTRuntimeMax, whole microseconds): the spec is not trusted, a LatencyNode
// may be written by hand or by a stolen manager token.
func rtRuntimeValue(s string) (string, error) {
	if s == v1alpha1.RTRuntimeUnlimited {
		return "-1", nil
	}
	const field = "spec.tuning.scheduler.rtRuntime"
	d, err := time.ParseDuration(strings.ReplaceAll(s, "µs", "us"))
	if err != nil {
		return "", fmt.Errorf("%s %q is neither %s nor a duration: %w", field, s, v1alpha1.RTRuntimeUnlimited, err)
	}
	if d%v1alpha1.RTRuntimeUnit != 0 {
		return "", fmt.Errorf("%s %s is not a whole number of microseconds (sched_rt_runtime_us): the kernel would get a truncated value", field, s)
	}
	if d < v1alpha1.RTRuntimeMin || d > v1alpha1.RTRuntimeMax {
		return "", fmt.Errorf("%s %s is out of bounds: it must be %s or from %v to %v of the 1s RT period, so real-time threads (IRQ threads included) and the rest of the node both keep running",
			field, s, v1alpha1.RTRuntimeUnlimited, v1alpha1.RTRuntimeMin, v1alpha1.RTRuntimeMax)
	}
	return strconv.FormatInt(d.Microseconds(), 10), nil
}

func toggle(t v1alpha1.Toggle) string {
	if t == v1alpha1.Enabled {
		return "1"
	}
	return "0"
}

func ns(d time.Duration) string { return strconv.FormatInt(d.Nanoseconds(), 10) }

func resolve(root *host.Root, l Layout, in intent) (knob.Knob, *v1alpha1.SettingResult) {
	id := in.knob.ID()
	unsupported := func(msg string) (knob.Knob, *v1alpha1.SettingResult) {
		return knob.Knob{}, &v1alpha1.SettingResult{Setting: id, Desired: in.value,
			State: v1alpha1.SettingUnsupported, Message: msg}
	}
	if in.invalid != "" {
		return knob.Knob{}, &v1alpha1.SettingResult{Setting: id, Desired: in.value,
			State: v1alpha1.SettingInvalid, Message: in.invalid + "; not written"}
	}
	if in.knob.EEVDFRemoved && l.EEVDF {
		return unsupported(fmt.Sprintf("%s does not exist on EEVDF kernels (6.6+); the scheduler has no such knob", in.knob.Field))
	}
	var tried []string
	for _, c := range in.knob.Places {
		path := candidatePath(root, c)
		tried = append(tried, path)
		if !root.Exists(path) {
			continue
		}
		if c.Debug != "" {
			if _, err := root.ReadString(path); err != nil {
				err = kerr.Classify("read", path, err)
				return unsupported(fmt.Sprintf("the kernel exposes %s but denies access to it (%v); debugfs is restricted on this kernel", path, errors.Unwrap(err)))
			}
		}
		return knob.Knob{ID: id, Path: path, Desired: in.value, Label: path}, nil
	}
	msg := fmt.Sprintf("none of %s exists on this kernel", strings.Join(tried, ", "))
	if l.DebugfsMissing {
		msg += "; debugfs is not mounted"
	}
	return unsupported(msg)
}

func candidatePath(root *host.Root, c knobs.Place) string {
	if c.Debug != "" {
		return root.DebugSched(c.Debug)
	}
	return root.Proc("sys", "kernel", c.Proc)
}

// rawKnob checks raw sysctl i of the spec: its name against the catalogue
// and the admin's list, its value against the catalogue's bounds.
func rawKnob(root *host.Root, i int, sc v1alpha1.Sysctl, admin knobs.AdminList) (knob.Knob, *v1alpha1.SettingResult) {
	id := knobs.SysctlID(sc.Name)
	invalid := func(msg string) (knob.Knob, *v1alpha1.SettingResult) {
		return knob.Knob{}, &v1alpha1.SettingResult{Setting: id, Desired: sc.Value, State: v1alpha1.SettingInvalid, Message: msg}
	}
	path, err := root.SysctlPath(sc.Name)
	if err != nil {
		return invalid(err.Error())
	}
	if msg, ok := knobs.Accepts(sc.Name, admin); !ok {
		return invalid(msg)
	}
	if n := utf8.RuneCountInString(sc.Value); n == 0 || n > knobs.MaxValueChars || strings.ContainsAny(sc.Value, "\n\x00") {
		return invalid(fmt.Sprintf("value must be 1-%d characters on one line (no newline or NUL)", knobs.MaxValueChars))
	}
	if msg, ok := knobs.CheckValue(sc.Name, sc.Value); !ok {
		return invalid(fmt.Sprintf("spec.tuning.sysctls[%d].value: %s; not written", i, msg))
	}
	if !root.Exists(path) {
		return knob.Knob{}, &v1alpha1.SettingResult{Setting: id, Desired: sc.Value,
			State: v1alpha1.SettingUnsupported, Message: fmt.Sprintf("%s does not exist on this kernel", path)}
	}
	if root.IsDir(path) {
		return knob.Knob{}, &v1alpha1.SettingResult{Setting: id, Desired: sc.Value,
			State: v1alpha1.SettingInvalid, Message: fmt.Sprintf("%s is a directory, not a sysctl", path)}
	}
	return knob.Knob{ID: id, Path: path, Desired: sc.Value, Equal: fieldsEqual, Label: filepath.Clean(path)}, nil
}

// fieldsEqual compares sysctl values the way sysctl(8) prints them: multi-
// field values ("4096 87380 6291456") match whatever whitespace separates them.
func fieldsEqual(actual, want string) bool {
	return strings.Join(strings.Fields(actual), " ") == strings.Join(strings.Fields(want), " ")
}

// ReadAdminList reads the cluster admin's sysctl unlock from path (the
// key of ConfigMap knobs.AdminConfigMap mounted into the agent's pod). No
// path or no file is no unlock: the volume is optional, and without the
// ConfigMap only the built-in allowlist applies (fail closed).
func ReadAdminList(path string) (knobs.AdminList, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the admin's sysctl unlock: %w", err)
	}
	return knobs.ParseAdminList(string(b)), nil
}
