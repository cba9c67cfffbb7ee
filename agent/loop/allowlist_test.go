package loop

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// The agent never trusts its LatencyNode for the sysctl allowlist: a
// forged spec with vm.panic_on_oom is reported Invalid and not written; the
// admin's list (the mounted ConfigMap key) is read on every pass, so
// unlocking applies it and removing it again restores the original.
func TestAgentEnforcesTheAdminsSysctlUnlock(t *testing.T) {
	c, env := startAPI(t)
	ctx := context.Background()
	root := fakeHost(t)
	testroot.Write(t, root.Proc("sys", "vm", "panic_on_oom"), "0")
	testroot.Write(t, root.Proc("sys", "net", "core", "busy_poll"), "0")
	unlock := filepath.Join(t.TempDir(), knobs.AdminKey)
	setUnlock := func(list string) {
		if err := os.WriteFile(unlock, []byte(list), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setUnlock("")
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(runCtx, Options{NodeName: "allow-a", Root: root, Resync: 300 * time.Millisecond, Config: env.Config,
			Log: testr.NewWithOptions(t, testr.Options{Verbosity: 1}), AllowedSysctlsFile: unlock})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "allow-a"},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "forged", ProfileGeneration: 1,
			Tuning: v1alpha1.TuningSpec{Sysctls: []v1alpha1.Sysctl{{Name: "vm.panic_on_oom", Value: "1"}, {Name: "net.core.busy_poll", Value: "50"}}}}}
	if err := c.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	setting := func(id string) v1alpha1.SettingResult {
		got := &v1alpha1.LatencyNode{}
		if err := c.Get(ctx, client.ObjectKey{Name: ln.Name}, got); err != nil {
			return v1alpha1.SettingResult{}
		}
		for _, s := range got.Status.Settings {
			if s.Setting == id {
				return s
			}
		}
		return v1alpha1.SettingResult{}
	}
	read := func(parts ...string) string { return testroot.Read(t, root.Proc(append([]string{"sys"}, parts...)...)) }
	eventually(t, "vm.panic_on_oom Invalid and net.core.busy_poll applied", func() bool {
		r := setting("sysctl/vm.panic_on_oom")
		return r.State == v1alpha1.SettingInvalid && strings.Contains(r.Message, knobs.AdminConfigMap) &&
			setting("sysctl/net.core.busy_poll").State == v1alpha1.SettingApplied
	})
	if v := read("vm", "panic_on_oom"); v != "0" {
		t.Fatalf("vm.panic_on_oom written without the unlock: %q", v)
	}
	setUnlock("vm.panic_on_oom\n")
	eventually(t, "vm.panic_on_oom applied once unlocked", func() bool { return read("vm", "panic_on_oom") == "1" })
	setUnlock("")
	eventually(t, "vm.panic_on_oom restored once locked again", func() bool { return read("vm", "panic_on_oom") == "0" })
	if v := read("net", "core", "busy_poll"); v != "50" {
		t.Errorf("net.core.busy_poll = %q, want 50 throughout", v)
	}
}
