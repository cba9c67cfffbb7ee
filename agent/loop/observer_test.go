package loop

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/measure"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// observed records what the loop tells an Observer (the agent's metrics).
type observed struct {
	mu         sync.Mutex
	profile    string
	states     map[string]v1alpha1.SettingState
	reasserted []string
}

func (o *observed) Observed(spec v1alpha1.LatencyNodeSpec, st v1alpha1.LatencyNodeStatus) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.profile = spec.Profile
	o.states = map[string]v1alpha1.SettingState{}
	for _, s := range st.Settings {
		o.states[s.Setting] = s.State
	}
}

func (o *observed) Reasserted(ids []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reasserted = append(o.reasserted, ids...)
}

func (o *observed) Measured(*measure.Result) {}

func (o *observed) get(f func(*observed) bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return f(o)
}

// TestObserverSeesPassesAndReasserts: every pass's settings reach the
// Observer, a drift's re-assert is named, and a LatencyNode that is gone
// leaves it with no settings.
func TestObserverSeesPassesAndReasserts(t *testing.T) {
	c, env := startAPI(t)
	ctx := context.Background()
	root := fakeHost(t)
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: spec()}
	if err := c.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	obs := &observed{}
	startObservedAgent(t, env, root, "node-a", 300*time.Millisecond, obs)
	eventually(t, "scheduler/autogroup Applied observed", func() bool {
		return obs.get(func(o *observed) bool {
			return o.profile == "gateway" && o.states["scheduler/autogroup"] == v1alpha1.SettingApplied
		})
	})
	if err := os.WriteFile(root.Proc("sys", "kernel", "sched_autogroup_enabled"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the re-assert of scheduler/autogroup observed", func() bool {
		return obs.get(func(o *observed) bool { return slices.Contains(o.reasserted, "scheduler/autogroup") })
	})
	if err := c.Delete(ctx, ln); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no settings once the LatencyNode is gone", func() bool {
		return obs.get(func(o *observed) bool { return o.profile == "" && len(o.states) == 0 })
	})
}
