package bound

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// The limits are the generated CRD's: a marker changed in the API without
// changing them here (or the other way round) fails this test.
func TestLimitsMatchCRD(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "crd", "bases", "tuning.latencytier.io_latencynodes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	versions := crd["spec"].(map[string]any)["versions"].([]any)
	status := dig(t, versions[0], "schema", "openAPIV3Schema", "properties", "status", "properties")
	cases := []struct {
		got  int
		path []string
	}{
		{Settings, []string{"settings", "maxItems"}},
		{SettingValue, []string{"settings", "items", "properties", "setting", "maxLength"}},
		{SettingValue, []string{"settings", "items", "properties", "desired", "maxLength"}},
		{SettingValue, []string{"settings", "items", "properties", "actual", "maxLength"}},
		{SettingMessage, []string{"settings", "items", "properties", "message", "maxLength"}},
		{SettingOwner, []string{"settings", "items", "properties", "owner", "maxLength"}},
		{Findings, []string{"findings", "maxItems"}},
		{FindingMessage, []string{"findings", "items", "properties", "message", "maxLength"}},
		{Throttling, []string{"throttling", "maxItems"}},
		{ConditionMessage, []string{"conditions", "items", "properties", "message", "maxLength"}},
		{Version, []string{"kernel", "properties", "version", "maxLength"}},
		{OnlineCPUs, []string{"kernel", "properties", "onlineCPUs", "maxLength"}},
		{SMTGroups, []string{"kernel", "properties", "smtSiblings", "maxItems"}},
		{SMTGroup, []string{"kernel", "properties", "smtSiblings", "items", "maxLength"}},
		{CmdlineFlags, []string{"kernel", "properties", "cmdlineIsolation", "maxItems"}},
		{CmdlineFlag, []string{"kernel", "properties", "cmdlineIsolation", "items", "maxLength"}},
		{SchedExtOps, []string{"kernel", "properties", "schedExt", "properties", "ops", "maxLength"}},
		{SchedExtNote, []string{"kernel", "properties", "schedExt", "properties", "note", "maxLength"}},
		{SchedClass, []string{"summary", "properties", "class", "maxLength"}},
		{SchedClass, []string{"current", "properties", "schedulerClass", "maxLength"}},
		{SchedClass, []string{"baseline", "properties", "schedulerClass", "maxLength"}},
		{SchedClassChange, []string{"current", "properties", "schedulerClassChange", "maxLength"}},
		{SchedClassChange, []string{"baseline", "properties", "schedulerClassChange", "maxLength"}},
	}
	for _, c := range cases {
		want, ok := dig(t, status, c.path...).(float64)
		if !ok || int(want) != c.got {
			t.Errorf("status.%s = %v in the CRD, %d here", strings.Join(c.path, "."), want, c.got)
		}
	}
}

func dig(t *testing.T, v any, path ...string) any {
	t.Helper()
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("no %q in the CRD schema (at %v)", p, path)
		}
		v = m[p]
	}
	return v
}

func TestString(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456..."},
		// Characters, not bytes: the CRD's maxLength counts characters.
		{strings.Repeat("é", 10), 10, strings.Repeat("é", 10)},
		{strings.Repeat("é", 11), 10, strings.Repeat("é", 7) + "..."},
		{"日本語のテキスト", 5, "日本..."},
		{"abcdef", 2, "ab"},
		// Not UTF-8: each stray byte becomes U+FFFD, as JSON encodes it.
		{"a\xffb\xfe", 10, "a\uFFFDb\uFFFD"},
	}
	for _, c := range cases {
		if got := String(c.in, c.n); got != c.want {
			t.Errorf("String(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// What String returns reads back unchanged through JSON (the API server's
// copy) and fits: the loop compares its status with that copy and must find
// them equal, or it patches on every pass.
func TestStringRoundTripsThroughJSON(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("x", 300) + "é" + strings.Repeat("y", 300), // a cut in bytes would split é
		strings.Repeat("é", 600),
		strings.Repeat("\xe6", 10),
		"cpu \xff\xfe list",
	} {
		for _, n := range []int{4, 256, 257, 512} {
			got := String(s, n)
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var back string
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back != got || !utf8.ValidString(got) || utf8.RuneCountInString(got) > n {
				t.Errorf("String(%.20q..., %d): %d characters, valid %v, JSON round trip equal %v",
					s, n, utf8.RuneCountInString(got), utf8.ValidString(got), back == got)
			}
		}
	}
}

func TestStrings(t *testing.T) {
	if got := Strings(nil, 3, 10); got != nil {
		t.Errorf("Strings(nil) = %q", got)
	}
	got := Strings([]string{"a", "b", "c"}, 3, 10)
	if strings.Join(got, ",") != "a,b,c" {
		t.Errorf("a list that fits changed: %q", got)
	}
	got = Strings([]string{"a", "b", "c", "d", "e"}, 3, 10)
	if strings.Join(got, ",") != "a,b,... 3 more" {
		t.Errorf("Strings(5 items, 3) = %q", got)
	}
	got = Strings([]string{strings.Repeat("z", 20)}, 3, 10)
	if got[0] != "zzzzzzz..." {
		t.Errorf("item not cut: %q", got)
	}
}

// Status strings quote what tenants control: a thread named
// "\x1b[31mevil\n" is escaped, not passed to whoever prints the status.
func TestStringEscapesControlCharacters(t *testing.T) {
	if got, want := String("thread 7 (\x1b[31mevil\n) of pod a/b", 100), `thread 7 (\x1b[31mevil\x0a) of pod a/b`; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
}
