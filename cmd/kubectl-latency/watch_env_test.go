package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// eventTimeout bounds each wait for the watch to show what the test wrote:
// generous, since it is how long the test waits on a loaded machine, not
// a claim about speed.
const eventTimeout = 60 * time.Second

// TestTopWatchPrintsChangedRows: kubectl latency top -w against a real
// kube-apiserver prints the table (only the header: -l selects nothing
// yet), then a row when a LatencyNode it selects is created, a row when
// its p99 changes, nothing for an update that changes no column (only the
// rows printed after it are counted, so no timing is assumed), the row
// once more when it is deleted, and returns nil when its context is
// cancelled, as on Ctrl-C.
func TestTopWatchPrintsChangedRows(t *testing.T) {
	c, err := client.New(testConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	root := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	root.SetArgs([]string{"--kubeconfig", kubeconfig, "top", "-w", "-l", "watched=yes"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	defer func() { t.Logf("$ kubectl latency top -w -l watched=yes\n%s", out.String()) }()

	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, eventTimeout, true, func(context.Context) (bool, error) {
			select {
			case err := <-done:
				t.Fatalf("top -w returned before it was cancelled: %v", err)
			default:
			}
			return ok(out.String()), nil
		})
		if err != nil {
			t.Fatalf("waiting for %s: %v\n%s", what, err, out.String())
		}
	}
	rows := func(s string, re string) int { return len(regexp.MustCompile(`(?m)`+re).FindAllString(s, -1)) }
	const w9 = `^w-9\s+gateway\s+Node\s+`
	waitFor("the header", func(s string) bool { return strings.HasPrefix(s, "NODE") })

	n := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "w-9", Labels: map[string]string{"watched": "yes"}},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionBaseline, Profile: "gateway"}}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), n) })
	waitFor("the new node's row", func(s string) bool { return rows(s, w9+`-\s+-\s+-\s+-\s+-\s+-\s+-$`) == 1 })

	setP99 := func(p99 time.Duration) {
		t.Helper()
		n.Status.Latency = &v1alpha1.LatencyStatus{Source: "Schedstat", Window: &metav1.Duration{Duration: 30 * time.Second},
			Classes: []v1alpha1.ClassLatency{{Class: "Node", Samples: 100, P50: &metav1.Duration{Duration: 5 * time.Microsecond}, P99: &metav1.Duration{Duration: p99}}}}
		if err := c.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	setP99(700 * time.Microsecond)
	waitFor("the row with p99 700µs", func(s string) bool { return rows(s, w9+`5µs\s+700µs\s`) == 1 })

	// A change no column shows (a label), then one it shows: the rows
	// printed in between are what the first one printed.
	n.Labels["note"] = "heartbeat"
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	setP99(2 * time.Millisecond)
	waitFor("the row with p99 2ms", func(s string) bool { return rows(s, w9+`5µs\s+2ms\s`) == 1 })
	if k := rows(out.String(), `^w-9\s`); k != 3 {
		t.Errorf("%d rows for w-9, want 3 (created, 700µs, 2ms): the update no column shows printed one", k)
	}

	if err := c.Delete(ctx, n); err != nil {
		t.Fatal(err)
	}
	waitFor("the deleted node's last row", func(s string) bool { return rows(s, w9+`5µs\s+2ms\s`) == 2 })
	if rows(out.String(), `^w-[123]\s`) != 0 {
		t.Error("top -w -l watched=yes printed a node the selector does not select")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("top -w after cancel: %v, want nil", err)
		}
	case <-time.After(eventTimeout):
		t.Fatal("top -w did not return after its context was cancelled")
	}
}

// TestBootWatchPrintsObjects: boot -w -o jsonpath=... against a real
// kube-apiserver prints a LatencyNode when boot starts to show it (its
// agent reported boot parameters), not when it was created without any,
// then again on each change: the created object's step label (1) is
// printed once, then step 2.
func TestBootWatchPrintsObjects(t *testing.T) {
	c, err := client.New(testConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	root := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	root.SetArgs([]string{"--kubeconfig", kubeconfig, "boot", "-w", "-l", "watched=boot",
		"-o", `jsonpath={.metadata.name}={.metadata.labels.step}{"\n"}`})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	n := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "w-8", Labels: map[string]string{"watched": "boot", "step": "1"}},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionBaseline, Profile: "gateway"}}
	if err := c.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), n) })
	n.Status.Boot = &v1alpha1.BootStatus{State: v1alpha1.BootStaged, Backend: "GRUB"}
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	n.Labels["step"] = "2"
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, eventTimeout, true, func(context.Context) (bool, error) {
		return strings.Contains(out.String(), "w-8=2\n"), nil
	})
	if want := "w-8=1\nw-8=2\n"; err != nil || out.String() != want {
		t.Errorf("boot -w printed %q (%v), want %q", out.String(), err, want)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("boot -w after cancel: %v, want nil", err)
		}
	case <-time.After(eventTimeout):
		t.Fatal("boot -w did not return after its context was cancelled")
	}
}
