// Package statstest: `make bench` is shell (hack/bench/run.sh); this test
// runs stats_test.sh, the checks on the pair statistics the report prints,
// so that `make test` keeps them (no root, no kernel state).
package statstest

import (
	"os/exec"
	"testing"
)

func TestPairStatistics(t *testing.T) {
	out, err := exec.Command("bash", "../stats_test.sh").CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("stats_test.sh: %v", err)
	}
}
