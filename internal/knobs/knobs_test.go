package knobs

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite docs/knobs.md from the catalogue")

// docs/knobs.md is rendered from the catalogue: a knob added here without
// regenerating the doc fails. The census section is this machine's kernel:
// compared only when the doc was taken on the same kernel release, so a CI
// machine with another kernel still checks everything else.
func TestDocIsCurrent(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "knobs.md")
	here := procSysCensus(t)
	if *update {
		if err := os.WriteFile(path, []byte(markdown(here)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recorded, ok := parseCensus(string(got))
	if !ok {
		t.Fatalf("%s has no census section: run go test ./internal/knobs -update", path)
	}
	want := markdown(here)
	switch {
	case recorded.Release != here.Release:
		t.Logf("census taken on kernel %s, this is %s: comparing the rest only", recorded.Release, here.Release)
		want = markdown(recorded)
	case !initialNetns():
		t.Logf("not in the initial network namespace (a container?): its /proc/sys/net differs, comparing the rest only")
		want = markdown(recorded)
	}
	if string(got) != want {
		t.Fatalf("%s is stale: run go test ./internal/knobs -update", path)
	}
}

// On a machine with another kernel the staleness check renders the doc
// with the census read back from it: that must give the same text.
func TestCensusRoundTrips(t *testing.T) {
	for _, c := range []Census{
		{Release: "6.1.0-28-amd64", Counts: map[Class]int{ClassTyped: 7, ClassAllowed: 20, ClassUnlockable: 1000, ClassRefused: 30}, Absent: []string{"a.b", "c.d"}},
		{Release: "6.12.1", Counts: map[Class]int{ClassAllowed: 1}},
	} {
		doc := markdown(c)
		back, ok := parseCensus(doc)
		if !ok || markdown(back) != doc {
			t.Errorf("census %+v read back as %+v (ok %v)", c, back, ok)
		}
	}
}

// initialNetns: the kernel lists net.core.netdev_max_backlog in the
// initial network namespace only.
func initialNetns() bool {
	_, err := os.Stat("/proc/sys/net/core/netdev_max_backlog")
	return err == nil
}

// procSysCensus classifies every sysctl this machine's /proc/sys lists,
// per-interface ones for lo only (CensusNames).
func procSysCensus(t *testing.T) Census {
	t.Helper()
	rel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatalf("no /proc/sys here: %v", err)
	}
	return TakeCensus(strings.TrimSpace(string(rel)), CensusNames(procSysNames(t)))
}

func procSysNames(t *testing.T) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir("/proc/sys", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a directory that vanished or cannot be listed
		}
		if !d.IsDir() {
			names = append(names, strings.ReplaceAll(strings.TrimPrefix(p, "/proc/sys/"), "/", "."))
		}
		return nil
	})
	if err != nil || len(names) == 0 {
		t.Fatalf("walking /proc/sys: %d names, %v", len(names), err)
	}
	return names
}

// Every sysctl this kernel lists is in exactly one class, and each class
// means what it says for the agent's check with and without the admin's
// unlock: the census in docs/knobs.md counts what is enforced.
func TestCensusClassifiesEveryName(t *testing.T) {
	names := procSysNames(t)
	c := TakeCensus("", names)
	if c.total() != len(names) || len(CensusNames(names)) >= len(names) {
		t.Fatalf("census counts %d of %d names", c.total(), len(names))
	}
	for _, n := range names {
		_, bare := Accepts(n, nil)
		_, unlocked := Accepts(n, AdminList{n})
		_, typed := TypedBy(n)
		_, refused := Refusal(n)
		var want Class
		switch {
		case typed && !bare && !unlocked:
			want = ClassTyped
		case refused && !bare && !unlocked:
			want = ClassRefused
		case bare && unlocked && !typed && !refused:
			want = ClassAllowed
		case !bare && unlocked && !typed && !refused:
			want = ClassUnlockable
		default:
			t.Errorf("%s fits no class: typed %v refused %v accepted %v, unlocked %v", n, typed, refused, bare, unlocked)
			continue
		}
		if got := Classify(n); got != want {
			t.Errorf("%s: Classify = %s, behaves as %s", n, got, want)
		}
	}
	// The review's finding: the old denylist accepted these without anyone's
	// say. Now they need the admin, or are refused outright.
	for n, cl := range map[string]Class{
		"vm.panic_on_oom": ClassUnlockable, "vm.overcommit_memory": ClassUnlockable, "vm.max_map_count": ClassUnlockable,
		"kernel.hung_task_panic": ClassUnlockable, "kernel.softlockup_panic": ClassUnlockable, "kernel.threads-max": ClassUnlockable,
		"user.max_mnt_namespaces": ClassUnlockable, "kernel.randomize_va_space": ClassUnlockable, "kernel.kptr_restrict": ClassUnlockable,
		"net.ipv4.conf.all.rp_filter": ClassUnlockable, "net.ipv4.neigh.default.gc_stale_time": ClassUnlockable,
		"kernel.sched_rt_period_us": ClassRefused, "kernel.core_pattern": ClassRefused, "vm.stat_refresh": ClassRefused,
		"net.core.busy_poll": ClassAllowed, "vm.stat_interval": ClassAllowed, "kernel.sched_rt_runtime_us": ClassTyped,
	} {
		if got := Classify(n); got != cl {
			t.Errorf("%s: %s, want %s", n, got, cl)
		}
	}
}

// Every name accepted without an unlock says why latency tuning needs it,
// is an exact global setting (nothing a namespace inherits), and has no
// refusal.
func TestAllowlistEntriesHaveTheirReason(t *testing.T) {
	for _, r := range rules {
		if !r.Allowed {
			continue
		}
		if r.Note == "" || r.Prefix || r.Refused != "" || r.Inherited || (r.Namespace != nsGlobal && r.Namespace != nsInitNet) {
			t.Errorf("allowlist entry %+v: needs a reason, an exact name, a global namespace, no refusal", r)
		}
	}
	if len(Allowed()) == 0 {
		t.Fatal("empty allowlist")
	}
}

func TestAdminList(t *testing.T) {
	a := ParseAdminList(" vm.panic_on_oom,\n net.ipv4.tcp_* \r\n,kernel.yama.\n*\n.\n,,")
	want := AdminList{"vm.panic_on_oom", "net.ipv4.tcp_*", "kernel.yama."}
	if !slices.Equal(a, want) {
		t.Fatalf("ParseAdminList = %q, want %q", a, want)
	}
	for n, ok := range map[string]bool{
		"vm.panic_on_oom": true, "vm.panic_on_oomx": false, "net.ipv4.tcp_fastopen": true, "net.ipv4.tcp": false,
		"kernel.yama.ptrace_scope": true, "kernel.yamaa": false, "kernel.panic": false,
	} {
		if a.Unlocks(n) != ok {
			t.Errorf("Unlocks(%s) = %v", n, !ok)
		}
	}
	// Unlocked or not, what runs code or cannot be undone stays refused.
	for _, n := range []string{"kernel.core_pattern", "kernel.yama.ptrace_scope", "kernel.sched_rt_period_us", "kernel.sched_rt_runtime_us"} {
		if msg, ok := Accepts(n, AdminList{n, "kernel."}); ok || !strings.Contains(msg, n) {
			t.Errorf("Accepts(%s) unlocked = %q %v, want refused naming it", n, msg, ok)
		}
	}
	if msg, ok := Accepts("vm.panic_on_oom", nil); ok || !strings.Contains(msg, AdminConfigMap) || !strings.Contains(msg, "vm.panic_on_oom") {
		t.Errorf("Accepts(vm.panic_on_oom) = %q %v, want refused naming the sysctl and the unlock", msg, ok)
	}
}

// config/admission/policy.yaml holds the allowlist policy exactly as the
// catalogue renders it (the chart's copy is checked against config/default
// by charts/charts_test.go). On a mismatch the failure prints the YAML.
func TestAllowlistPolicyMatchesTheCatalogue(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "admission", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type policy struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Variables   []CELVariable `json:"variables"`
			Validations []struct {
				Expression        string `json:"expression"`
				MessageExpression string `json:"messageExpression"`
			} `json:"validations"`
		} `json:"spec"`
	}
	vars, expr, msg := AllowlistPolicy()
	var found bool
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var p policy
		if err := yaml.Unmarshal([]byte(doc), &p); err != nil {
			t.Fatal(err)
		}
		if p.Kind != "ValidatingAdmissionPolicy" || p.Metadata.Name != AllowlistPolicyName {
			continue
		}
		found = true
		ok := slices.EqualFunc(p.Spec.Variables, vars, func(a, b CELVariable) bool { return a == b }) &&
			len(p.Spec.Validations) == 1 && p.Spec.Validations[0].Expression == expr && p.Spec.Validations[0].MessageExpression == msg
		if !ok {
			var want strings.Builder
			want.WriteString("  variables:\n")
			for _, v := range vars {
				fmt.Fprintf(&want, "  - name: %s\n    expression: %q\n", v.Name, v.Expression)
			}
			fmt.Fprintf(&want, "  validations:\n  - expression: %q\n    messageExpression: %q\n", expr, msg)
			t.Errorf("policy %s differs from internal/knobs; put this in config/admission/policy.yaml and charts/latencytier/templates/admission-policies.yaml:\n%s", AllowlistPolicyName, want.String())
		}
	}
	if !found {
		t.Fatalf("config/admission/policy.yaml has no ValidatingAdmissionPolicy %s", AllowlistPolicyName)
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
		{"net.core.busy_poll", nsInitNet, ""},
		{"net.core.somaxconn", nsNet, ""},
		{"kernel.sched_rt_period_us", nsGlobal, rtGuard},
		{"vm.stat_refresh", nsGlobal, action},
		{"net.ipv4.conf.all.rp_filter", nsNet, ""},
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
