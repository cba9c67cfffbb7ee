package loop

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/apply"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func irqRes(n int, state v1alpha1.SettingState, actual, msg string) v1alpha1.SettingResult {
	return v1alpha1.SettingResult{Setting: fmt.Sprintf("irq/%d", n), Desired: "0", Actual: actual, State: state, Message: msg}
}

// IRQ lines fold by (desired, actual, state, message); single IRQs, the
// default mask and other settings keep their lines.
func TestSummariseIRQs(t *testing.T) {
	var rs []v1alpha1.SettingResult
	for n := 24; n <= 31; n++ {
		rs = append(rs, irqRes(n, v1alpha1.SettingApplied, "0", ""))
	}
	rs = append(rs, irqRes(36, v1alpha1.SettingImmovable, "0-3", "IRQ 36 (virtio0-req.0) refuses new affinity"),
		irqRes(40, v1alpha1.SettingApplied, "0", ""), irqRes(42, v1alpha1.SettingApplied, "0", ""),
		irqRes(50, v1alpha1.SettingFailed, "0-3", "write IRQ 50: EIO"), irqRes(51, v1alpha1.SettingFailed, "0-3", "write IRQ 51: EIO"),
		v1alpha1.SettingResult{Setting: "irq/default_smp_affinity", Desired: "1", Actual: "1", State: v1alpha1.SettingApplied},
		v1alpha1.SettingResult{Setting: "scheduler/autogroup", Desired: "0", Actual: "0", State: v1alpha1.SettingApplied})
	got := SummariseIRQs(rs)
	var lines []string
	for _, s := range got {
		lines = append(lines, fmt.Sprintf("%s×%d %s", s.Setting, s.Count, s.State))
	}
	want := []string{"irq/24-31,40,42×10 Applied", "irq/36×0 Immovable", "irq/50×0 Failed", "irq/51×0 Failed",
		"irq/default_smp_affinity×0 Applied", "scheduler/autogroup×0 Applied"}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("SummariseIRQs =\n%q\nwant\n%q", lines, want)
	}
	if settingCount(got) != len(rs) || rs[0].Setting != "irq/24" {
		t.Errorf("%d settings counted, want %d (or the input was modified)", settingCount(got), len(rs))
	}
}

// IRQs irqbalance placed are one line whichever reserved CPU it picked, so
// its moves change nothing in status.
func TestSummariseIRQsPlacedByIRQBalance(t *testing.T) {
	placed := "placed by irqbalance (pid 812) within the reserved CPUs"
	rs := []v1alpha1.SettingResult{irqRes(24, v1alpha1.SettingApplied, "0", placed), irqRes(25, v1alpha1.SettingApplied, "1", placed),
		irqRes(26, v1alpha1.SettingApplied, "0-1", placed), irqRes(36, v1alpha1.SettingImmovable, "0-3", "refuses")}
	got := SummariseIRQs(rs)
	if len(got) != 2 || got[0].Setting != "irq/24-26" || got[0].Count != 3 || got[0].Actual != "" || got[1].Actual != "0-3" {
		t.Errorf("SummariseIRQs = %+v, want irq/24-26 (3, no actual) and irq/36", got)
	}
	if rs[0].Actual != "0" {
		t.Error("the input was modified")
	}
}

// A node with 300 IRQs, two of them failing: status lists a handful of
// lines, and Applied, settingsOmitted and the failures count every IRQ.
func TestSummarisedIRQsCountPerIRQ(t *testing.T) {
	var rs []v1alpha1.SettingResult
	for n := range 300 {
		rs = append(rs, irqRes(24+2*n, v1alpha1.SettingApplied, "0", "")) // no range shortens them
	}
	rs = append(rs, irqRes(1001, v1alpha1.SettingFailed, "0-3", "EIO"), irqRes(1002, v1alpha1.SettingFailed, "0-3", "EIO"))
	st := applyStatus(v1alpha1.LatencyNodeStatus{}, applyInput{Node: node(1, nil), Report: apply.Report{Results: rs},
		Now: metav1.NewTime(time.Unix(1000, 0))})
	if len(st.Settings) != 2 || st.SettingsOmitted != 0 {
		t.Fatalf("settings %+v, omitted %d; want 2 lines", st.Settings, st.SettingsOmitted)
	}
	failed, applied := st.Settings[0], st.Settings[1]
	if failed.Setting != "irq/1001-1002" || failed.Count != 2 || applied.Count != 300 ||
		!strings.HasSuffix(applied.Setting, "…+"+fmt.Sprint(300-len(strings.Split(applied.Setting, ","))+1)) ||
		len([]rune(applied.Setting)) > 256 {
		t.Errorf("lines %q×%d, %q×%d", failed.Setting, failed.Count, applied.Setting, applied.Count)
	}
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.NodeApplied)
	if c == nil || c.Reason != v1alpha1.ReasonPartiallyApplied || !strings.HasPrefix(c.Message, "300 applied") ||
		!strings.Contains(c.Message, "irq/1001-1002 (Failed)") {
		t.Errorf("Applied = %+v", c)
	}
	// Past the list's cap, what is left out counts every IRQ it holds.
	var many []v1alpha1.SettingResult
	for n := range bound256 {
		many = append(many, res(fmt.Sprintf("cpuquota/ns/pod-%03d", n), v1alpha1.SettingFailed))
	}
	many = append(many, rs...)
	st = applyStatus(v1alpha1.LatencyNodeStatus{}, applyInput{Node: node(1, nil), Report: apply.Report{Results: many},
		Now: metav1.NewTime(time.Unix(1000, 0))})
	if st.SettingsOmitted != 302 {
		t.Errorf("settingsOmitted = %d, want the 302 IRQs of the two lines left out", st.SettingsOmitted)
	}
}

const bound256 = 256

// IRQs left to different owners are not folded into one line naming one.
func TestSummariseIRQsKeepsOwnersApart(t *testing.T) {
	owned := func(id, owner string) v1alpha1.SettingResult {
		return v1alpha1.SettingResult{Setting: id, Desired: "0", State: v1alpha1.SettingOwnedBy, Owner: owner, Message: "left to its owner"}
	}
	got := SummariseIRQs([]v1alpha1.SettingResult{owned("irq/1", "tuned"), owned("irq/2", "tuned"), owned("irq/3", "crio")})
	if len(got) != 2 || got[0].Setting != "irq/1-2" || got[0].Owner != "tuned" || got[1].Setting != "irq/3" || got[1].Owner != "crio" {
		t.Fatalf("summary %+v; want irq/1-2 tuned's and irq/3 crio's", got)
	}
}
