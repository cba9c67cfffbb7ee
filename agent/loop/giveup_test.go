package loop

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A restore whose read keeps failing (EISDIR here, EPERM on a node) keeps
// Reverted False for a bounded number of passes, then Reverted turns True
// with RevertConflict and the setting stays visible in status with its
// original, so a profile deletion waiting on Reverted completes.
func TestRevertStatusAfterPersistentRestoreFailure(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/sys/a": "1\n"})
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	a := root.Proc("sys", "a")
	if _, err := e.Apply(apply.Meta{Profile: "gw"}, []knob.Knob{{ID: "k/a", Path: a, Desired: "0"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	ln := node(4, nil)
	ln.Spec.Action = v1alpha1.ActionRevert
	st := v1alpha1.LatencyNodeStatus{Profile: "gw"}
	var c *metav1.Condition
	for pass := 1; pass <= apply.MaxRestoreAttempts+1; pass++ {
		rep, err := e.Revert()
		st = revertStatus(st, revertInput{Node: ln, Report: rep, Err: err, Now: metav1.NewTime(time.Unix(int64(pass), 0))})
		c = meta.FindStatusCondition(st.Conditions, v1alpha1.NodeReverted)
		if done := c != nil && c.Status == metav1.ConditionTrue; done != (pass >= apply.MaxRestoreAttempts) {
			t.Fatalf("pass %d: Reverted = %+v", pass, c)
		}
	}
	if c.Reason != v1alpha1.ReasonRevertConflict || !strings.Contains(c.Message, `k/a (could not restore "1")`) {
		t.Errorf("Reverted = %s %q", c.Reason, c.Message)
	}
	if len(st.Settings) != 1 || st.Settings[0].State != v1alpha1.SettingConflict || !strings.Contains(st.Settings[0].Message, "by hand") {
		t.Errorf("settings = %+v, want the given-up setting as a Conflict", st.Settings)
	}
}
