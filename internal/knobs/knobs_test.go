package knobs

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/knobs.md from the catalogue")

// docs/knobs.md is rendered from the catalogue: a knob added here without
// regenerating the doc fails.
func TestDocIsCurrent(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "knobs.md")
	want := markdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: run go test ./internal/knobs -update", path)
	}
}

func TestLookup(t *testing.T) {
	cases := []struct {
		name    string
		ns      namespace
		refused reason
	}{
		{"kernel.core_pattern", nsGlobal, runsHelper},
		{"kernel.modprobe", nsGlobal, runsHelper},
		{"fs.binfmt_misc.register", nsGlobal, runsHelper},
		{"kernel.modules_disabled", nsGlobal, oneWay},
		{"kernel.yama.ptrace_scope", nsGlobal, oneWay},
		{"kernel.usermodehelper.bset", nsGlobal, oneWay},
		{"kernel.shmmax", nsIPC, namespacedAway},
		{"kernel.sem", nsIPC, namespacedAway},
		{"kernel.msg_next_id", nsIPC, namespacedAway},
		{"fs.mqueue.msg_max", nsIPC, namespacedAway},
		{"kernel.hostname", nsUTS, notTuning},
		{"net.ipv4.route.flush", nsNet, action},
		{"vm.drop_caches", nsGlobal, action},
		{"net.core.busy_poll", nsNet, ""},
		{"user.max_user_namespaces", nsUser, ""},
		{"kernel.pid_max", nsPID, namespacedAway},
		{"vm.memfd_noexec", nsPID, namespacedAway},
		{"vm.swappiness", nsGlobal, ""},
		{"kernel.core_pipe_limit", nsGlobal, ""},
		{"kernel.io_uring_disabled", nsGlobal, ""},
		{"fs.binfmt_misc", nsGlobal, ""}, // the directory: the agent refuses directories
	}
	for _, tc := range cases {
		r, _ := lookup(tc.name)
		if r.Namespace != tc.ns || r.Refused != tc.refused {
			t.Errorf("%s: namespace %q refused %q, want %q %q", tc.name, r.Namespace, r.Refused, tc.ns, tc.refused)
		}
		msg, refused := Refusal(tc.name)
		if refused != (tc.refused != "") || (refused && !strings.HasPrefix(msg, "sysctl "+tc.name+" is refused: ")) {
			t.Errorf("%s: Refusal = %q, %v", tc.name, msg, refused)
		}
	}
}

func TestTypedBy(t *testing.T) {
	for name, field := range map[string]string{
		"kernel.sched_autogroup_enabled": "autogroup", "kernel.numa_balancing": "numaBalancing",
		"kernel.sched_migration_cost_ns": "migrationCost", "kernel.sched_min_granularity_ns": "baseSlice",
		"kernel.sched_latency_ns": "latency", "kernel.sched_wakeup_granularity_ns": "wakeupGranularity",
		"kernel.sched_rt_runtime_us": "rtRuntime",
	} {
		if s, ok := TypedBy(name); !ok || s.Field != field {
			t.Errorf("TypedBy(%s) = %q %v, want %s", name, s.Field, ok, field)
		}
	}
	if _, ok := TypedBy("kernel.sched_rt_period_us"); ok {
		t.Error("sched_rt_period_us has no typed field")
	}
}

// The texts go into CEL string literals and namespacedAway's sentence names
// the IPC and PID namespaces only.
func TestCatalogueIsConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range rules {
		if seen[r.Name] {
			t.Errorf("%s listed twice", r.Name)
		}
		seen[r.Name] = true
		if r.Refused == namespacedAway && r.Namespace != nsIPC && r.Namespace != nsPID {
			t.Errorf("%s: namespacedAway is worded for IPC and PID only", r.Name)
		}
		if strings.ContainsAny(r.Name, `'"\`) || (r.Prefix && r.Name == "") {
			t.Errorf("bad rule name %q", r.Name)
		}
		if _, typed := TypedBy(r.Name); typed {
			t.Errorf("%s is a typed knob and a rule", r.Name)
		}
	}
	for _, r := range reasons {
		if strings.ContainsAny(r.why(), "'\"`\\") {
			t.Errorf("%s: Why holds a quote or backslash", r)
		}
	}
}
