package knobs

import (
	"strings"

	"latencytier.io/latencytier/internal/settingid"
)

// Per-CPU power setting IDs: power/cpu<N>/<leaf>. One knob per CPU (PM QoS,
// cpuidle states) or per cpufreq policy (governor, named by its first CPU
// of the class).
const (
	// ResumeLatencyLeaf is cpuN/power/pm_qos_resume_latency_us.
	ResumeLatencyLeaf = "resume-latency"
	// GovernorLeaf is cpuN/cpufreq/scaling_governor.
	GovernorLeaf = "governor"
)

// IdleDisableLeaf is cpuN/cpuidle/state<K>/disable.
func IdleDisableLeaf(state string) string { return "idle-state" + state + "/disable" }

// PowerID is the setting ID of one power knob of CPU cpu.
func PowerID(cpu, leaf string) string { return settingid.Power.ID("cpu"+cpu, leaf) }

// PowerClassID names a result about a whole class (all, reserved,
// isolated), e.g. "power/isolated/governor" when no CPU has cpufreq.
func PowerClassID(class, leaf string) string { return settingid.Power.ID(class, leaf) }

// PM QoS resume latency values (drivers/base/power/sysfs.c): the file reads
// and takes microseconds, except that "0" means no limit at all and "n/a"
// means no latency is tolerated (only polling idle).
const (
	ResumeLatencyNoLimit = "0"
	ResumeLatencyNone    = "n/a"
)

// powerMarkdown documents the power knobs in docs/knobs.md.
func powerMarkdown(b *strings.Builder) {
	b.WriteString("## Power (idle states, cpufreq)\n\n")
	b.WriteString("`spec.power.{all,reserved,isolated}` becomes, per CPU of the class:\n\n")
	b.WriteString("| setting ID | file under `/sys/devices/system/cpu/cpu<N>/` | value |\n|---|---|---|\n")
	b.WriteString("| `" + PowerID("<N>", ResumeLatencyLeaf) + "` | `power/pm_qos_resume_latency_us` | `maxIdleExitLatency` in whole µs; 0us is written `" +
		ResumeLatencyNone + "` (no latency tolerated: polling only), because the kernel reads and takes `" + ResumeLatencyNoLimit + "` as no limit |\n")
	b.WriteString("| `" + PowerID("<N>", IdleDisableLeaf("<K>")) + "` | `cpuidle/state<K>/disable` | `1` for each state whose `latency` (µs) exceeds `maxIdleExitLatency` |\n")
	b.WriteString("| `" + PowerID("<N>", GovernorLeaf) + "` | `cpufreq/scaling_governor` | `governor`; one knob per cpufreq policy (CPUs sharing it share the governor) |\n\n")
	b.WriteString("Both idle controls are written: the menu, teo and ladder governors honour the PM QoS limit and the disable files, idle injection only the disable files, the haltpoll governor only a limit of 0. ")
	b.WriteString("A CPU without the PM QoS file, without cpufreq (most VMs) or whose cpufreq driver does not offer the governor is reported `Unsupported` for its class, never `Failed`.\n\n")
}
