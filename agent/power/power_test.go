package power

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A server layout this machine lacks: 4 CPUs, intel_idle-like states
// (POLL 0µs, C1 2µs, C1E 10µs, C6 133µs), two cpufreq policies of two CPUs
// each (cpuN/cpufreq is a link to cpufreq/policyP, as the kernel has it).
var serverStates = []struct {
	name    string
	latency int
}{{"POLL", 0}, {"C1", 2}, {"C1E", 10}, {"C6", 133}}

type layout struct {
	cpus      int
	idle      bool   // cpuidle states per CPU
	qos       bool   // pm_qos_resume_latency_us per CPU
	freq      bool   // cpufreq policies of two CPUs
	available string // scaling_available_governors
	driver    string // cpuidle/current_driver
	governor  string // cpuidle/current_governor
}

var server = layout{cpus: 4, idle: true, qos: true, freq: true,
	available: "conservative ondemand userspace powersave performance schedutil", driver: "intel_idle", governor: "menu"}

func fakeRoot(t *testing.T, l layout) *host.Root {
	t.Helper()
	cpu := "sys/devices/system/cpu/"
	files := map[string]string{cpu + "online": fmt.Sprintf("0-%d\n", l.cpus-1),
		cpu + "cpuidle/current_driver": l.driver + "\n", cpu + "cpuidle/current_governor": l.governor + "\n"}
	for n := 0; n < l.cpus; n++ {
		d := fmt.Sprintf("%scpu%d/", cpu, n)
		files[d+"topology/core_id"] = "0\n"
		if l.qos {
			files[d+"power/pm_qos_resume_latency_us"] = "0\n"
		}
		for k, s := range serverStates {
			if l.idle {
				sd := fmt.Sprintf("%scpuidle/state%d/", d, k)
				files[sd+"name"], files[sd+"latency"], files[sd+"disable"] = s.name+"\n", fmt.Sprintf("%d\n", s.latency), "0\n"
			}
		}
		if l.freq && n%2 == 0 {
			p := fmt.Sprintf("%scpufreq/policy%d/", cpu, n)
			files[p+"scaling_governor"] = "powersave\n"
			files[p+"scaling_available_governors"] = l.available + "\n"
			files[p+"affected_cpus"] = fmt.Sprintf("%d %d\n", n, n+1)
		}
	}
	root := testroot.New(t, files)
	if l.freq {
		for n := 0; n < l.cpus; n++ {
			link := root.Sys("devices", "system", "cpu", fmt.Sprintf("cpu%d", n), "cpufreq")
			if err := os.Symlink(fmt.Sprintf("../cpufreq/policy%d", n-n%2), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func us(n int) *metav1.Duration {
	return &metav1.Duration{Duration: time.Duration(n) * time.Microsecond}
}

func gov(g v1alpha1.CPUGovernor) *v1alpha1.CPUGovernor { return &g }

func str(s string) *string { return &s }

func tuning(reserved, isolated string, p v1alpha1.PowerSpec) v1alpha1.TuningSpec {
	t := v1alpha1.TuningSpec{Power: &p, CPUs: &v1alpha1.CPUSpec{}}
	if reserved != "" {
		t.CPUs.Reserved = str(reserved)
	}
	if isolated != "" {
		t.CPUs.Isolated = str(isolated)
	}
	return t
}

// summary is "ID=desired" per knob, relative paths checked separately.
func summary(ks []knob.Knob) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.ID+"="+k.Desired)
	}
	return out
}

func TestKnobsPerClassOnAServer(t *testing.T) {
	root := fakeRoot(t, server)
	ks, rs := Knobs(root, tuning("0-1", "2-3", v1alpha1.PowerSpec{
		Reserved: &v1alpha1.CPUPower{MaxIdleExitLatency: us(10), Governor: gov(v1alpha1.GovernorSchedutil)},
		Isolated: &v1alpha1.CPUPower{MaxIdleExitLatency: us(0), Governor: gov(v1alpha1.GovernorPerformance)},
	}))
	if len(rs) != 0 {
		t.Fatalf("results = %+v, want none", rs)
	}
	want := []string{
		// 10µs: C6 (133) goes, C1E (10) stays: the limit is inclusive, as
		// in the governors (exit latency <= limit).
		"power/cpu0/resume-latency=10", "power/cpu0/idle-state3/disable=1", "power/cpu0/governor=schedutil",
		"power/cpu1/resume-latency=10", "power/cpu1/idle-state3/disable=1", // policy0 already set via cpu0
		// 0µs is written "n/a": a plain 0 would mean no limit at all.
		"power/cpu2/resume-latency=n/a", "power/cpu2/idle-state1/disable=1", "power/cpu2/idle-state2/disable=1", "power/cpu2/idle-state3/disable=1",
		"power/cpu2/governor=performance",
		"power/cpu3/resume-latency=n/a", "power/cpu3/idle-state1/disable=1", "power/cpu3/idle-state2/disable=1", "power/cpu3/idle-state3/disable=1",
	}
	if got := summary(ks); !slices.Equal(got, want) {
		t.Fatalf("knobs:\n got %q\nwant %q", got, want)
	}
	for _, k := range ks {
		rel, _ := filepath.Rel(root.Dir(), k.Path)
		switch {
		case strings.HasSuffix(k.ID, "resume-latency") && !strings.HasSuffix(rel, "/power/pm_qos_resume_latency_us"),
			strings.HasSuffix(k.ID, "/disable") && !strings.Contains(rel, "/cpuidle/state"),
			strings.HasSuffix(k.ID, "governor") && !strings.HasSuffix(rel, "/cpufreq/scaling_governor"):
			t.Errorf("%s writes %s", k.ID, rel)
		}
	}
	if l := ks[2].Label; !strings.Contains(l, "policy of CPUs 0 1") {
		t.Errorf("governor label %q does not name the CPUs sharing the policy", l)
	}
}

func TestAllCoversEveryOnlineCPU(t *testing.T) {
	root := fakeRoot(t, layout{cpus: 2, qos: true})
	ks, rs := Knobs(root, v1alpha1.TuningSpec{Power: &v1alpha1.PowerSpec{All: &v1alpha1.CPUPower{MaxIdleExitLatency: us(0)}}})
	if got := summary(ks); !slices.Equal(got, []string{"power/cpu0/resume-latency=n/a", "power/cpu1/resume-latency=n/a"}) || len(rs) != 0 {
		t.Fatalf("knobs %q results %+v", got, rs)
	}
}

// No cpufreq, no PM QoS file: one Unsupported result per class, never
// Failed, and no knob.
func TestMissingFilesAreUnsupportedPerClass(t *testing.T) {
	root := fakeRoot(t, layout{cpus: 4})
	ks, rs := Knobs(root, tuning("0", "1-3", v1alpha1.PowerSpec{
		Isolated: &v1alpha1.CPUPower{MaxIdleExitLatency: us(0), Governor: gov(v1alpha1.GovernorPerformance)},
	}))
	if len(ks) != 0 {
		t.Fatalf("knobs %q, want none", summary(ks))
	}
	if len(rs) != 2 {
		t.Fatalf("results %+v, want two", rs)
	}
	for i, id := range []string{"power/isolated/resume-latency", "power/isolated/governor"} {
		if rs[i].Setting != id || rs[i].State != v1alpha1.SettingUnsupported || !strings.Contains(rs[i].Message, "1-3") {
			t.Errorf("result %d = %+v, want %s Unsupported naming CPUs 1-3", i, rs[i], id)
		}
	}
}

func TestGovernorTheDriverDoesNotOfferIsUnsupported(t *testing.T) {
	l := server
	l.available = "performance powersave" // intel_pstate, active mode
	ks, rs := Knobs(fakeRoot(t, l), tuning("0-1", "", v1alpha1.PowerSpec{
		Reserved: &v1alpha1.CPUPower{Governor: gov(v1alpha1.GovernorSchedutil)}}))
	if len(ks) != 0 || len(rs) != 1 || rs[0].Setting != "power/reserved/governor" || rs[0].State != v1alpha1.SettingUnsupported ||
		!strings.Contains(rs[0].Message, "performance powersave") {
		t.Fatalf("knobs %q results %+v", summary(ks), rs)
	}
}

// CPUs 0 and 1 share policy0: reserved and isolated cannot both set it.
func TestClassesSharingAPolicyConflict(t *testing.T) {
	ks, rs := Knobs(fakeRoot(t, server), tuning("0", "1", v1alpha1.PowerSpec{
		Reserved: &v1alpha1.CPUPower{Governor: gov(v1alpha1.GovernorSchedutil)},
		Isolated: &v1alpha1.CPUPower{Governor: gov(v1alpha1.GovernorPerformance)}}))
	if got := summary(ks); !slices.Equal(got, []string{"power/cpu0/governor=schedutil"}) {
		t.Fatalf("knobs %q", got)
	}
	if len(rs) != 1 || rs[0].Setting != "power/cpu1/governor" || rs[0].State != v1alpha1.SettingInvalid || !strings.Contains(rs[0].Message, "CPU 0") {
		t.Fatalf("results %+v", rs)
	}
}

func TestOfflineClassIsInvalidAndUntouched(t *testing.T) {
	ks, rs := Knobs(fakeRoot(t, server), tuning("0", "2-5", v1alpha1.PowerSpec{
		Isolated: &v1alpha1.CPUPower{MaxIdleExitLatency: us(0)}}))
	if len(ks) != 0 || len(rs) != 1 || rs[0].Setting != "power/isolated" || rs[0].State != v1alpha1.SettingInvalid || !strings.Contains(rs[0].Message, "4-5") {
		t.Fatalf("knobs %q results %+v", summary(ks), rs)
	}
}

func TestLimitIsWholeMicrosecondsRoundedDown(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "n/a", 999 * time.Nanosecond: "n/a", 1500 * time.Nanosecond: "1", 10 * time.Millisecond: "10000"} {
		if got := resumeLatencyValue(limitUS(d)); got != want {
			t.Errorf("%s → %q, want %q", d, got, want)
		}
	}
	for in, want := range map[string]uint64{"n/a": 0, "0": noLimit, "25": 25} {
		if got, ok := parseResumeLatency(in); !ok || got != want {
			t.Errorf("parse %q = %d, %v; want %d", in, got, ok, want)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
