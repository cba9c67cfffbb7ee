package settingid

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		id      string
		kind    string
		rest    string
		culprit string
		scope   string
		thread  bool
	}{
		{id: "scheduler/autogroup", kind: "scheduler/", rest: "autogroup", culprit: sysctlWriter},
		{id: "sysctl/net.core.busy_poll", kind: "sysctl/", rest: "net.core.busy_poll", culprit: sysctlWriter},
		{id: "irq/24", kind: "irq/", rest: "24", culprit: "a tool writing /proc/irq (irqbalance, tuned)"},
		{id: "cpuset/system.slice", kind: "cpuset/", rest: "system.slice", culprit: cpusetWriter},
		{id: "cpuset/pods", kind: "cpuset/", rest: "pods", culprit: cpusetWriter},
		{id: "cpuset/pod/ns/p/uid/c1", kind: "cpuset/pod/", rest: "ns/p/uid/c1", culprit: cpusetWriter, scope: "cpuset/pod/ns/p"},
		{id: "cpuquota/ns/p/uid", kind: "cpuquota/", rest: "ns/p/uid", culprit: "kubelet or the container runtime", scope: "cpuquota/ns/p"},
		{id: "rtsched/ns/p/uid/12@34", kind: "rtsched/", rest: "ns/p/uid/12@34", culprit: RTSched.Culprit, scope: "rtsched/ns/p", thread: true},
		{id: "rtsched/ns/p/uid", kind: "rtsched/", rest: "ns/p/uid", culprit: RTSched.Culprit, scope: "rtsched/ns/p"},
		{id: "partition/exclusive/kubepods.slice", kind: "partition/", rest: "exclusive/kubepods.slice", culprit: Partition.Culprit},
		{id: "power/cpu3/governor", kind: "power/", rest: "cpu3/governor", culprit: Power.Culprit},
		{id: "boot/grub", kind: "boot/", rest: "grub", culprit: Boot.Culprit},
		{id: "sched:12@34", culprit: sysctlWriter},
		{id: "irq/", culprit: sysctlWriter},
	} {
		k, rest, ok := Parse(c.id)
		if got := map[bool]string{true: k.Prefix()}[ok]; got != c.kind || rest != c.rest {
			t.Errorf("Parse(%q) = %q, %q; want %q, %q", c.id, got, rest, c.kind, c.rest)
		}
		if got := Culprit(c.id); got != c.culprit {
			t.Errorf("Culprit(%q) = %q, want %q", c.id, got, c.culprit)
		}
		if got, _ := PodScope(c.id); got != c.scope {
			t.Errorf("PodScope(%q) = %q, want %q", c.id, got, c.scope)
		}
		if got := IsThread(c.id); got != c.thread {
			t.Errorf("IsThread(%q) = %v", c.id, got)
		}
	}
	if got := Thread(Pod(RTSched, "ns", "p", "uid"), "12", "34"); got != "rtsched/ns/p/uid/12@34" {
		t.Errorf("Thread = %q", got)
	}
}

// repoRoot is the module root, two levels up.
func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// literals calls f with every string literal in the repository's Go files
// (tests too when tests is set), outside vendor and this package.
func literals(t *testing.T, tests bool, f func(file, key, lit string)) {
	root := repoRoot(t)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if rel == "internal/settingid" || strings.HasPrefix(d.Name(), ".") || d.Name() == "vendor" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") != tests {
			return nil
		}
		file, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			key := ""
			if kv, ok := n.(*ast.KeyValueExpr); ok {
				if id, ok := kv.Key.(*ast.Ident); ok {
					key, n = id.Name, kv.Value
				}
			}
			if b, ok := n.(*ast.BasicLit); ok && b.Kind == token.STRING {
				if s, err := strconv.Unquote(b.Value); err == nil {
					f(rel, key, s)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// notIDs are literals that start like a setting ID and are not one.
var notIDs = map[string]string{
	"agent/measure/attribution.go\x00irq/": "the comm of the kernel's threaded-IRQ handlers (irq/24-eth0), not a setting",
}

// TestNoPrefixLiteralOutsideCatalogue fails on a setting-ID prefix spelled
// in a production file outside this package: IDs are built with Kind.ID.
func TestNoPrefixLiteralOutsideCatalogue(t *testing.T) {
	var names []string
	for _, k := range Kinds {
		if k.Name != Boot.Name { // "boot/grub/grub.cfg" is a file path under the root
			names = append(names, k.Name)
		}
	}
	re := regexp.MustCompile(`^(` + strings.Join(names, "|") + `)/`)
	literals(t, false, func(file, _, lit string) {
		if re.MatchString(lit) && notIDs[file+"\x00"+lit] == "" {
			t.Errorf("%s: setting-ID literal %q: build it with internal/settingid", file, lit)
		}
	})
}

// TestEveryTestIDParses parses every setting ID the test suites name (the
// Setting and ID fields' literals and testdata's "setting" values): an ID
// of a kind the catalogue does not know fails.
func TestEveryTestIDParses(t *testing.T) {
	seen := 0
	check := func(where, id string) {
		seen++
		if _, _, ok := Parse(id); !ok {
			t.Errorf("%s: setting ID %q is of no kind in the catalogue", where, id)
		}
	}
	literals(t, true, func(file, key, lit string) {
		if key == "Setting" && lit != "" {
			check(file, lit)
		}
	})
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "hack/scale/apicost/testdata/latencynode.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`"setting":\s*"([^"]+)"`).FindAllStringSubmatch(string(data), -1) {
		check("hack/scale/apicost/testdata/latencynode.json", m[1])
	}
	if seen < 20 {
		t.Fatalf("only %d IDs found in the test suites: the collector is broken", seen)
	}
}
