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
	want := Markdown()
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
		ns      Namespace
		refused Reason
	}{
		{"kernel.core_pattern", Global, RunsHelper},
		{"kernel.modprobe", Global, RunsHelper},
		{"fs.binfmt_misc.register", Global, RunsHelper},
		{"kernel.modules_disabled", Global, OneWay},
		{"kernel.yama.ptrace_scope", Global, OneWay},
		{"kernel.usermodehelper.bset", Global, OneWay},
		{"kernel.shmmax", IPC, NamespacedAway},
		{"kernel.sem", IPC, NamespacedAway},
		{"kernel.msg_next_id", IPC, NamespacedAway},
		{"fs.mqueue.msg_max", IPC, NamespacedAway},
		{"kernel.hostname", UTS, NotTuning},
		{"net.ipv4.route.flush", Net, Action},
		{"vm.drop_caches", Global, Action},
		{"net.core.busy_poll", Net, ""},
		{"user.max_user_namespaces", User, ""},
		{"kernel.pid_max", PID, ""},
		{"vm.swappiness", Global, ""},
		{"kernel.core_pipe_limit", Global, ""},
		{"kernel.io_uring_disabled", Global, ""},
		{"fs.binfmt_misc", Global, ""}, // the directory: the agent refuses directories
	}
	for _, tc := range cases {
		r, _ := Lookup(tc.name)
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

// The texts go into CEL string literals and NamespacedAway's sentence names
// the IPC namespace.
func TestCatalogueIsConsistent(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Rules {
		if seen[r.Name] {
			t.Errorf("%s listed twice", r.Name)
		}
		seen[r.Name] = true
		if r.Refused == NamespacedAway && r.Namespace != IPC {
			t.Errorf("%s: NamespacedAway is worded for IPC only", r.Name)
		}
		if strings.ContainsAny(r.Name, `'"\`) || (r.Prefix && r.Name == "") {
			t.Errorf("bad rule name %q", r.Name)
		}
		if _, typed := TypedBy(r.Name); typed {
			t.Errorf("%s is a typed knob and a rule", r.Name)
		}
	}
	for _, r := range Reasons {
		if strings.ContainsAny(r.Why(), "'\"`\\") {
			t.Errorf("%s: Why holds a quote or backslash", r)
		}
	}
}
