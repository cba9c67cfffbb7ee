// Package cgstat reads one cgroup's CPU bandwidth files: the cpu.stat
// throttling and burst counters, the quota (v1 cpu.cfs_quota_us, v2
// cpu.max) and the burst (v1 cpu.cfs_burst_us, v2 cpu.max.burst). The
// cpuquota writer and measure's throttling both read them here, so measure
// does not depend on an actuation package.
package cgstat

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"latencytier.io/latencytier/agent/host"
)

// Files holding the limit.
const (
	QuotaFileV1 = "cpu.cfs_quota_us"
	MaxFileV2   = "cpu.max"
	// UnlimitedV1 is the v1 "no limit" quota.
	UnlimitedV1 = "-1"
	// BurstFileV1 and BurstFileV2 hold the CFS burst in microseconds per
	// period (Linux 5.14+; absent before).
	BurstFileV1 = "cpu.cfs_burst_us"
	BurstFileV2 = "cpu.max.burst"
)

// Throttling is a cgroup's cumulative cpu.stat throttling counters, and its
// burst counters (Linux 5.14+): the periods in which it ran beyond its
// quota on burst, and the time it ran so.
type Throttling struct {
	Periods, Throttled int64
	Time               time.Duration
	Bursts             int64
	BurstTime          time.Duration
}

// Read reads cgroup dir's cpu.stat. It understands v1 (nr_periods,
// nr_throttled, throttled_time in ns, nr_bursts, burst_time in ns) and v2
// (nr_periods, nr_throttled, throttled_usec, nr_bursts, burst_usec). A
// cgroup without bandwidth control (v2 cpu.stat without nr_periods), or a
// kernel without burst, reports zeros for what it lacks.
func Read(root *host.Root, dir string) (Throttling, error) {
	path := filepath.Join(dir, "cpu.stat")
	b, err := root.ReadFile(path)
	if err != nil {
		return Throttling{}, err
	}
	var t Throttling
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var key string
		var val int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %d", &key, &val); err != nil {
			return Throttling{}, fmt.Errorf("parsing %s line %q: %w", path, sc.Text(), err)
		}
		switch key {
		case "nr_periods":
			t.Periods = val
		case "nr_throttled":
			t.Throttled = val
		case "throttled_time":
			t.Time = time.Duration(val)
		case "throttled_usec":
			t.Time = time.Duration(val) * time.Microsecond
		case "nr_bursts":
			t.Bursts = val
		case "burst_time":
			t.BurstTime = time.Duration(val)
		case "burst_usec":
			t.BurstTime = time.Duration(val) * time.Microsecond
		}
	}
	return t, sc.Err()
}

// ParseMax parses a cgroup v2 cpu.max value "<quota|max> [<period>]". quota
// is -1 for max; period is 0 when the value has none (a value as written,
// "max"; the kernel's file always has one).
func ParseMax(s string) (quota, period int64, err error) {
	f := strings.Fields(s)
	if len(f) < 1 || len(f) > 2 {
		return 0, 0, fmt.Errorf("malformed cpu.max %q", s)
	}
	quota = -1
	if f[0] != "max" {
		if quota, err = strconv.ParseInt(f[0], 10, 64); err != nil || quota < 0 {
			return 0, 0, fmt.Errorf("malformed cpu.max quota %q", s)
		}
	}
	if len(f) == 2 {
		if period, err = strconv.ParseInt(f[1], 10, 64); err != nil || period <= 0 {
			return 0, 0, fmt.Errorf("malformed cpu.max period %q", s)
		}
	}
	return quota, period, nil
}

// Quota reads cgroup dir's CFS quota in microseconds per period: -1 when
// unlimited.
func Quota(root *host.Root, version int, dir string) (int64, error) {
	if version == 2 {
		path := filepath.Join(dir, MaxFileV2)
		s, err := root.ReadString(path)
		if err != nil {
			return 0, err
		}
		q, _, err := ParseMax(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		return q, nil
	}
	path := filepath.Join(dir, QuotaFileV1)
	s, err := root.ReadString(path)
	if err != nil {
		return 0, err
	}
	q, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed %s %q", path, s)
	}
	return max(q, -1), nil
}

// HasLimit reports whether cgroup dir (of cgroup version) has a CFS quota.
func HasLimit(root *host.Root, version int, dir string) bool {
	if version == 2 {
		s, err := root.ReadString(filepath.Join(dir, MaxFileV2))
		if err != nil {
			return false
		}
		q, _, err := ParseMax(s)
		return err == nil && q >= 0
	}
	s, err := root.ReadString(filepath.Join(dir, QuotaFileV1))
	return err == nil && s != UnlimitedV1
}
