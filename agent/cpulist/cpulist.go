// Package cpulist parses kernel cpulists ("0-3,8") from the spec and from
// kernel files with a bound: k8s.io/utils/cpuset.Parse expands every range
// into a map, so "0-5000000" costs hundreds of MiB. Parse refuses a list
// naming a CPU at or above MaxCPUs, or whose ranges add up to more than
// MaxCPUs CPUs, before anything is expanded. Every cpulist the agent parses
// goes through it.
package cpulist

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/host"
)

// MaxCPUs bounds CPU numbers: the largest NR_CPUS a distribution kernel is
// built with (x86_64 CONFIG_MAXSMP) is 8192.
const MaxCPUs = 8192

// Parse parses a cpulist (surrounding whitespace ignored; "" is the empty
// set) after checking that every CPU is below MaxCPUs and the ranges name
// at most MaxCPUs CPUs in total (overlaps counted twice).
func Parse(s string) (cpuset.CPUSet, error) {
	s = strings.TrimSpace(s)
	if err := check(s); err != nil {
		return cpuset.New(), err
	}
	return cpuset.Parse(s)
}

func check(s string) error {
	if s == "" {
		return nil
	}
	total := 0
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := cpu(lo)
		if err != nil {
			return err
		}
		b := a
		if isRange {
			if b, err = cpu(hi); err != nil {
				return err
			}
			if b < a {
				return fmt.Errorf("cpulist range %q ends before it starts", r)
			}
		}
		total += b - a + 1
		if total > MaxCPUs {
			return fmt.Errorf("cpulist names more than %d CPUs", MaxCPUs)
		}
	}
	return nil
}

func cpu(s string) (int, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n >= MaxCPUs {
		return 0, fmt.Errorf("CPU %s is out of range: CPUs are numbered below %d", s, MaxCPUs)
	}
	return n, nil
}

// Online is the host's online CPUs (/sys/devices/system/cpu/online).
func Online(root *host.Root) (cpuset.CPUSet, error) {
	path := root.Sys("devices", "system", "cpu", "online")
	s, err := root.ReadString(path)
	if err != nil {
		return cpuset.New(), fmt.Errorf("reading the online CPUs: %w", err)
	}
	set, err := Parse(s)
	if err != nil {
		return cpuset.New(), fmt.Errorf("parsing %s: %w", path, err)
	}
	return set, nil
}
