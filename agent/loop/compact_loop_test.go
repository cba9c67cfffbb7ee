package loop

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A host with 256 movable IRQs, their originals in several spellings: the
// status the API server stores lists them in one line counted 256, and a
// revert restores every IRQ's file byte for byte from the journal.
func TestSummarisedIRQsRevertEveryIRQ(t *testing.T) {
	c, _ := startAPI(t)
	originals := map[string]string{}
	forms := []string{"0-1", "1", "0,1", "1-1"}
	for n := 24; n < 24+256; n++ {
		originals[fmt.Sprintf("proc/irq/%d/smp_affinity_list", n)] = forms[n%len(forms)]
	}
	root := fakeHostWith(t, originals)
	ctx := context.Background()
	if err := c.Create(ctx, &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-irq"}, Spec: spec()}); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, NodeName: "node-irq", Root: root, Resync: time.Second,
		Engine: &apply.Engine{Root: root, Log: testr.New(t)}}
	pass(t, r, "node-irq")
	ln := getLN(t, c, "node-irq")
	var irqs []v1alpha1.SettingResult
	for _, s := range ln.Status.Settings {
		if s.Setting != "irq/default_smp_affinity" && len(s.Setting) > 4 && s.Setting[:4] == "irq/" {
			irqs = append(irqs, s)
		}
	}
	if len(irqs) != 1 || irqs[0].Setting != "irq/24-279" || irqs[0].Count != 256 || irqs[0].State != v1alpha1.SettingApplied {
		t.Fatalf("IRQ lines in status = %+v; want one irq/24-279 counted 256", irqs)
	}
	if !conditionIs(ln, v1alpha1.NodeApplied, metav1.ConditionTrue) || ln.Status.SettingsOmitted != 0 {
		t.Fatalf("Applied %+v, settingsOmitted %d", ln.Status.Conditions, ln.Status.SettingsOmitted)
	}
	for rel := range originals {
		if got := testroot.Read(t, root.Path(rel)); got != "0" {
			t.Fatalf("%s = %q after the apply, want 0", rel, got)
		}
	}
	moveTo(t, c, "node-irq", v1alpha1.ActionRevert, "", v1alpha1.TuningSpec{})
	pass(t, r, "node-irq")
	if ln = getLN(t, c, "node-irq"); !conditionIs(ln, v1alpha1.NodeReverted, metav1.ConditionTrue) {
		t.Fatalf("Reverted = %+v", ln.Status.Conditions)
	}
	for rel, want := range originals {
		if b, err := os.ReadFile(root.Path(rel)); err != nil || string(b) != want {
			got := string(b)
			t.Errorf("%s = %q after the revert, want the original %q", rel, got, want)
		}
	}
}
