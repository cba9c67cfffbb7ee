//go:build privileged

package facts

import (
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
)

func TestReadThisMachine(t *testing.T) {
	root := testroot.RealKernel(t)
	f := Read(root, true, false)
	if f.Version == "" || f.OnlineCPUs == "" || f.CgroupMode == "" {
		t.Fatalf("facts = %+v", f)
	}
	t.Logf("facts: %+v", f)
}
