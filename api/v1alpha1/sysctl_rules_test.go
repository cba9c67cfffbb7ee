package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// sysctlItems finds every spec...sysctls.items schema in a generated CRD.
func sysctlItems(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if s, ok := c.(map[string]any); ok && k == "sysctls" {
					if items, ok := s["items"].(map[string]any); ok {
						out = append(out, items)
					}
				}
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	if len(out) == 0 {
		t.Fatalf("%s has no sysctls schema", file)
	}
	return out
}

// The CEL deny-lists of both CRDs (LatencyNode embeds the same TuningSpec,
// so a hand-written LatencyNode is no way around them) are exactly the knob
// catalogue's. On a mismatch the failure prints the markers to paste above
// the Sysctl type.
func TestSysctlRulesMatchTheCatalogue(t *testing.T) {
	var want []string
	var markers []string
	for _, r := range knobs.CELRules() {
		want = append(want, r.Rule+"\n"+r.MessageExpression+"\n"+r.FieldPath)
		markers = append(markers, r.Marker())
	}
	slices.Sort(want)
	for _, file := range []string{"tuning.latencytier.io_latencyprofiles.yaml", "tuning.latencytier.io_latencynodes.yaml"} {
		for _, items := range sysctlItems(t, file) {
			var got []string
			rules, _ := items["x-kubernetes-validations"].([]any)
			for _, r := range rules {
				m := r.(map[string]any)
				fieldPath, _ := m["fieldPath"].(string)
				got = append(got, fmt.Sprint(m["rule"])+"\n"+fmt.Sprint(m["messageExpression"])+"\n"+fieldPath)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s: the Sysctl CEL rules differ from internal/knobs; put these above type Sysctl and run make manifests:\n%s",
					file, strings.Join(markers, "\n"))
			}
			value := items["properties"].(map[string]any)["value"].(map[string]any)
			if fmt.Sprint(value["maxLength"]) != fmt.Sprint(knobs.MaxValueChars) {
				t.Errorf("%s: value maxLength %v, the agent allows %d characters", file, value["maxLength"], knobs.MaxValueChars)
			}
		}
	}
}

// Every spec.scheduler field is in the catalogue and nothing else is: a
// typed knob, or the class (knobs.SchedulerClassField, not a file).
func TestSchedulerFieldsMatchTheCatalogue(t *testing.T) {
	var fields []string
	typ := reflect.TypeFor[v1alpha1.SchedulerSpec]()
	for i := range typ.NumField() {
		fields = append(fields, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
	}
	cat := []string{knobs.SchedulerClassField}
	for _, s := range knobs.SchedulerKnobs {
		cat = append(cat, s.Field)
	}
	slices.Sort(fields)
	slices.Sort(cat)
	if !slices.Equal(fields, cat) {
		t.Errorf("SchedulerSpec fields %v, catalogue %v", fields, cat)
	}
}

// The API server refuses, naming the field and the sysctl, what the agent
// must never write: helpers run as root, one-way switches, IPC-namespaced
// knobs, and values the kernel would cut at a newline.
func TestRefusedSysctlsAreRejectedAtAdmission(t *testing.T) {
	cases := []struct{ name, value, why string }{
		{"kernel.core_pattern", "|/tmp/x %p", "run a program as root"},
		{"kernel.modprobe", "/tmp/x", "run a program as root"},
		{"fs.binfmt_misc.register", ":x:E::x::/tmp/x:C", "run a program as root"},
		{"kernel.modules_disabled", "1", "cannot be set back"},
		{"kernel.yama.ptrace_scope", "3", "cannot be set back"},
		{"kernel.shmmax", "68719476736", "IPC or PID namespace"},
		{"fs.mqueue.msg_max", "100", "IPC or PID namespace"},
		{"kernel.pid_max", "4194304", "IPC or PID namespace"},
		{"kernel.hostname", "x", "not a tuning knob"},
		{"kernel.sched_rt_runtime_us", "-1", "spec.scheduler (rtRuntime)"},
		{"kernel.sched_rt_period_us", "2000000", "RT period must not be changed"},
		{"net.core.busy_poll", "50\n0", "newline"},
		{"net.core.busy_poll", "50\x000", "NUL"},
	}
	for i, tc := range cases {
		t.Run(tc.name+"/"+tc.why, func(t *testing.T) {
			spec := fmt.Sprintf("%ssysctls:\n- name: %s\n  value: %q", selector, tc.name, tc.value)
			obj := profile(t, fmt.Sprintf("refused-%d", i), spec)
			err := k8s.Create(context.Background(), obj)
			if err == nil {
				_ = k8s.Delete(context.Background(), obj)
				t.Fatalf("API server accepted sysctl %s=%q", tc.name, tc.value)
			}
			for _, w := range []string{"spec.sysctls[0]", "sysctl " + tc.name, tc.why} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message does not name %q:\n%v", w, err)
				}
			}
		})
	}
}

// The same rules hold on LatencyNode, whose spec the agent applies.
func TestRefusedSysctlsAreRejectedOnLatencyNode(t *testing.T) {
	ln := &v1alpha1.LatencyNode{
		ObjectMeta: metav1.ObjectMeta{Name: "refused-sysctl"},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "p",
			Tuning: v1alpha1.TuningSpec{Sysctls: []v1alpha1.Sysctl{{Name: "kernel.core_pattern", Value: "|/tmp/x %p"}}}},
	}
	err := k8s.Create(context.Background(), ln)
	if err == nil {
		_ = k8s.Delete(context.Background(), ln)
		t.Fatal("API server accepted a LatencyNode with kernel.core_pattern")
	}
	if !strings.Contains(err.Error(), "spec.tuning.sysctls[0]") || !strings.Contains(err.Error(), "sysctl kernel.core_pattern is refused") {
		t.Errorf("message does not name the field and sysctl: %v", err)
	}
}

// The other side: sysctls in the neighbourhood of the refused ones pass the
// CRD's rules (whether the admin must unlock them is the allowlist
// policy's question, tested with config/admission in controllers), and
// value length is counted in characters.
func TestNeighboursOfRefusedSysctlsAreAccepted(t *testing.T) {
	spec := selector + "sysctls:\n" +
		"- name: kernel.core_pipe_limit\n  value: \"4\"\n" +
		"- name: kernel.sched_rr_timeslice_ms\n  value: \"100\"\n" +
		"- name: net.core.busy_poll\n  value: \"50\"\n" +
		"- name: fs.binfmt_misc\n  value: \"1\"\n" +
		"- name: vm.max_map_count\n  value: \"" + strings.Repeat("é", knobs.MaxValueChars) + "\"\n"
	obj := profile(t, "refused-neighbours", spec)
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("allowed sysctls rejected: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

// kubectl explain names, for every scheduler field, each file the knob
// lives in per the catalogue.
func TestSchedulerDocsNameTheCataloguePlaces(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "tuning.latencytier.io_latencyprofiles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]struct {
								Properties map[string]struct {
									Description string `json:"description"`
								} `json:"properties"`
							} `json:"properties"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	fields := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["scheduler"].Properties
	for _, s := range knobs.SchedulerKnobs {
		doc := strings.Join(strings.Fields(fields[s.Field].Description), " ")
		for _, p := range s.Places {
			if name := p.Proc + p.Debug; !strings.Contains(doc, name) {
				t.Errorf("spec.scheduler.%s description does not name %s: %q", s.Field, name, doc)
			}
		}
	}
}
