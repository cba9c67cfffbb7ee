package cpuquota

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Stat reads a cgroup's cpu.stat throttling counters. It understands v1
// (nr_periods, nr_throttled, throttled_time in ns) and v2 (nr_periods,
// nr_throttled, throttled_usec). A cgroup without bandwidth control (v2
// cpu.stat without nr_periods) reports zeros.
func Stat(dir string) (periods, throttled int64, throttledTime time.Duration, err error) {
	path := filepath.Join(dir, "cpu.stat")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var key string
		var val int64
		if _, err := fmt.Sscanf(sc.Text(), "%s %d", &key, &val); err != nil {
			return 0, 0, 0, fmt.Errorf("parsing %s line %q: %w", path, sc.Text(), err)
		}
		switch key {
		case "nr_periods":
			periods = val
		case "nr_throttled":
			throttled = val
		case "throttled_time":
			throttledTime = time.Duration(val)
		case "throttled_usec":
			throttledTime = time.Duration(val) * time.Microsecond
		}
	}
	return periods, throttled, throttledTime, sc.Err()
}
