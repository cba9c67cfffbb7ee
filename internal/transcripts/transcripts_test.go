package transcripts

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the marked blocks of README.md and docs/*.md from docs/transcripts/")

// root is the repository, two levels up from this package.
var root = filepath.Join("..", "..")

// TestDocsShowTheE2ETranscripts: every command output the README and docs/
// mark as a transcript is the one hack/e2e.sh last wrote, but for figures,
// ages, times and the run's names; every transcript the e2e writes is shown
// somewhere. After a run that changed an output, rerun with -update.
func TestDocsShowTheE2ETranscripts(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	shown := map[string]bool{}
	readmeBlocks := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		blocks, err := Blocks(text)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if filepath.Base(doc) == "README.md" {
			readmeBlocks = len(blocks)
		}
		// Back to front, so an -update keeps the earlier offsets valid.
		for i := len(blocks) - 1; i >= 0; i-- {
			blk := blocks[i]
			shown[blk.Path] = true
			f := readTranscript(t, blk.Path)
			got, want := Normalize(blk.Body, blk.Names), Normalize(f.Body, f.Names)
			if got == want && (!*update || blk.Body == f.Body) {
				continue
			}
			if *update {
				text = text[:blk.Start] + Render(blk.Path, f) + text[blk.End:]
				continue
			}
			t.Errorf("%s: the block copying %s differs from it (rerun with -update after checking the change):\n%s",
				rel(doc), blk.Path, lineDiff(got, want))
		}
		if *update && text != string(b) {
			if err := os.WriteFile(doc, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if readmeBlocks == 0 {
		t.Error("README.md marks no transcript: its outputs would not be checked")
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "transcripts", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		p := filepath.ToSlash(rel(f))
		if !shown[p] {
			t.Errorf("%s is written by hack/e2e.sh but no document shows it", p)
		}
	}
}

func readTranscript(t *testing.T, path string) File {
	t.Helper()
	if !strings.HasPrefix(path, "docs/transcripts/") || strings.Contains(path, "..") {
		t.Fatalf("transcript %q: want docs/transcripts/NAME.txt", path)
	}
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatalf("transcript %s: %v (hack/e2e.sh writes it)", path, err)
	}
	f, err := Parse(string(b))
	if err != nil {
		t.Fatalf("transcript %s: %v", path, err)
	}
	return f
}

func rel(p string) string {
	r, err := filepath.Rel(root, p)
	if err != nil {
		return p
	}
	return r
}

// lineDiff prints the lines of two normalized texts that differ.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var out []string
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			out = append(out, "  document:   "+a, "  transcript: "+b)
		}
	}
	return strings.Join(out, "\n")
}

// A run on another day, another machine, with other figures: the same.
func TestNormalizeIgnoresWhatChangesBetweenRuns(t *testing.T) {
	a := `$ kubectl get ln -o wide
NAME   PROFILE   APPLIED   P99          REPORTED   AGE   KERNEL            REVISION
vm     e2e       True      3.924292ms   4s         23s   6.18.44-fc-v782   e2e-7dccd500
  before p99 300µs (p50 15µs, 60000 samples), window 30s ending 2026-01-01T00:00:00Z
`
	b := `$ kubectl get ln -o wide
NAME       PROFILE   APPLIED   P99     REPORTED   AGE     KERNEL           REVISION
worker-7   e2e       True      412µs   -          5m10s   6.1.0-31-amd64   e2e-0a1b2c3d
  before p99 1.2ms (p50 7µs, 812 samples), window 30s ending 2026-12-02T08:01:02Z
`
	na := Normalize(a, map[string]string{"node": "vm", "kernel": "6.18.44-fc-v782"})
	nb := Normalize(b, map[string]string{"node": "worker-7", "kernel": "6.1.0-31-amd64"})
	if na != nb {
		t.Errorf("runs differing only in figures and names compare different:\n%s", lineDiff(na, nb))
	}
}

// The README's printer-column samples before this check: hand-pasted,
// without the columns added since (ROLLOUT, STALE, REPORTED) and with
// ones since moved to -o wide. They must read as stale against a real run.
func TestNormalizeCatchesStaleColumnsAndWording(t *testing.T) {
	real := `$ kubectl get lp
NAME   MATCHED   APPLIED   DEGRADED   STALE   WORST-P99   READY   ROLLOUT   AGE
e2e    1         1         0          0       1.2ms       True    -         2m
`
	for name, stale := range map[string]string{
		"old columns": `$ kubectl get lp
NAME      MATCHED   APPLIED   DEGRADED   WORST-P99   THROTTLED   READY   AGE
e2e       3         3         0          412µs       0           True    5m
`,
		"other state": `$ kubectl get lp
NAME   MATCHED   APPLIED   DEGRADED   STALE   WORST-P99   READY   ROLLOUT   AGE
e2e    1         1         0          0       1.2ms       False   -         2m
`,
		"other command": `$ kubectl get lp -o wide
NAME   MATCHED   APPLIED   DEGRADED   STALE   WORST-P99   READY   ROLLOUT   AGE
e2e    1         1         0          0       1.2ms       True    -         2m
`,
		"a line left out": `$ kubectl get lp
NAME   MATCHED   APPLIED   DEGRADED   STALE   WORST-P99   READY   ROLLOUT   AGE
`,
	} {
		if Normalize(stale, nil) == Normalize(real, nil) {
			t.Errorf("%s: a stale copy compares equal to the real output", name)
		}
	}
	// A message reworded: free text is compared word for word.
	if Normalize("Rollout e2e-7dccd500: 1 node(s) hold e2e-7dccd500 and passed\n", nil) ==
		Normalize("Rollout e2e-7dccd500: 1 node(s) are on e2e-7dccd500 and passed\n", nil) {
		t.Error("a reworded message compares equal")
	}
	// A regression is still a regression, whatever it was judged on.
	if Normalize("  verdict Regressed: throttled ratio 0 → 0.09\n", nil) == Normalize("  verdict Improved: p99 1ms → 0.5ms\n", nil) {
		t.Error("a regression compares equal to a pass")
	}
}

// What the machine's load decides, not the code: which passing verdict,
// which findings, how the wait split, what a regression was judged on.
func TestNormalizeIgnoresWhatTheLoadDecides(t *testing.T) {
	a := `Findings:
  Warning  AutogroupEnabled: kernel.sched_autogroup_enabled=1: each session gets as much CPU
  Warning  RunQueueOverloaded: procs_running stayed at 31 or more
  verdict Regressed: throttled ratio 0 → 0.09, +0.09 > +0.05 (revision e2e-rollout-b732907b)
    default/rollout-server waited 5s per second: 75 % unattributed, 20 % / (system service)
Rollout e2e-rollout-b732907b: node vm regressed: throttled ratio 0 → 0.09, +0.09 > +0.05; rolled back 1 node(s) to e2e-rollout-e49419a0
  NODE  STATE    VERDICT
  vm    Applied  Unchanged
cpuquota/default/rollout-server/c41afb63-2086-433b-ba6d-e26db37c8712/bb692ad3be48
`
	b := `Findings:
  none
  verdict Regressed: measured pods' run delay p99 8.064ms → 63.909647ms, 7.93× > 1.2× (revision e2e-rollout-337c7ba7)
    default/rollout-server waited 38ms per second: 70 % default/e2e-hog (pod), 30 % idle
Rollout e2e-rollout-337c7ba7: node vm regressed: measured pods' run delay p99 8.064ms → 63.909647ms, 7.93× > 1.2×; rolled back 1 node(s) to e2e-rollout-7dccd500
  NODE  STATE    VERDICT
  vm    Applied  Improved
cpuquota/default/rollout-server/0b7c5d2e-1111-4c2a-9d3e-0123456789ab/0f1e2d3c4b5a
`
	if na, nb := Normalize(a, nil), Normalize(b, nil); na != nb {
		t.Errorf("runs differing in what the load decides compare different:\n%s", lineDiff(na, nb))
	}
}

// An empty cell, "-" and a value are the same figure in an aligned table.
func TestNormalizeTableCells(t *testing.T) {
	a := "NAME   P99     AGE\ne2e    412µs   5m\n"
	b := "NAME   P99   AGE\ne2e          5m\n"
	c := "NAME   P99   AGE\ne2e    -     5m\n"
	if Normalize(a, nil) != Normalize(b, nil) || Normalize(b, nil) != Normalize(c, nil) {
		t.Errorf("cells compare different:\n%s\n%s\n%s", Normalize(a, nil), Normalize(b, nil), Normalize(c, nil))
	}
}

func TestBlocksAndRender(t *testing.T) {
	f, err := Parse("# hack/e2e.sh 2026-12-02T08:00:00Z node=vm kernel=6.18\n$ kubectl get ln\nNAME   AGE\nvm     1s\n")
	if err != nil {
		t.Fatal(err)
	}
	doc := "intro\n\n" + Render("docs/transcripts/get-ln.txt", f) + "\n\nmore\n"
	blocks, err := Blocks(doc)
	if err != nil || len(blocks) != 1 {
		t.Fatalf("blocks %v, %v", blocks, err)
	}
	blk := blocks[0]
	if blk.Path != "docs/transcripts/get-ln.txt" || blk.Body != f.Body || blk.Names["node"] != "vm" || blk.Names["kernel"] != "6.18" {
		t.Errorf("block %+v", blk)
	}
	if doc[blk.End:] != "\n\nmore\n" {
		t.Errorf("block ends before %q", doc[blk.End:])
	}
	names := []string{}
	for k := range blk.Names {
		names = append(names, k)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "kernel,node" {
		t.Errorf("names %v", names)
	}
	if _, err := Blocks("<!-- transcript docs/transcripts/x.txt -->\nnot a fence\n"); err == nil {
		t.Error("a marker without a fenced block is accepted")
	}
	if _, err := Parse("$ kubectl get ln\n"); err == nil {
		t.Error("a transcript without its header is accepted")
	}
}

// A row whose name is replaced by a key of another length still splits
// into its cells, so an empty cell reads # whether or not the run filled
// it (a POD-P99 the e2e measured once and not the next time).
func TestNormalizeNamesDoNotShiftCells(t *testing.T) {
	const head = "NAME   POD-P99   THROTTLED   KERNEL            REVISION\n"
	empty := head + "vm                 1.0000      6.18.44-fc-v857   r-e49419a0\n"
	full := head + "vm     7.5ms     0.0000      6.18.44-fc-v1252  r-e49419a0\n"
	a := Normalize(empty, map[string]string{"kernel": "6.18.44-fc-v857", "node": "vm"})
	b := Normalize(full, map[string]string{"kernel": "6.18.44-fc-v1252", "node": "vm"})
	if a != b {
		t.Errorf("an empty and a filled cell normalize differently:\n%s\n%s", a, b)
	}
	if !strings.Contains(a, "| <node> | # | # | <kernel> | r-<hash>") {
		t.Errorf("row not split into cells: %s", a)
	}
}

// Which pods waited in the window is the load's: the CI run of stop 51 had
// default/latency-workload wait too, a run before only default/rollout-server.
func TestNormalizeIgnoresWhichPodsWaited(t *testing.T) {
	one := `$ kubectl latency explain vm
  Node   8.448µs  6.051555ms  82.193066ms  227.634022ms  76203
  who made the measured pods wait:
    default/rollout-server waited 4.6s per second: 45 % default/e2e-hog (pod), 35 % unattributed

Settings (what the profile changed, what the kernel reports):
`
	two := `$ kubectl latency explain vm
  Node   9µs  5ms  80ms  200ms  70000
  who made the measured pods wait:
    default/latency-workload waited 12ms per second: 100 % unattributed
    default/rollout-server waited 3.1s per second: 60 % default/e2e-hog (pod)

Settings (what the profile changed, what the kernel reports):
`
	if a, b := Normalize(one, nil), Normalize(two, nil); a != b {
		t.Errorf("runs differing only in which pods waited compare different:\n%s", lineDiff(a, b))
	}
	// What follows the waits still counts.
	other := strings.Replace(two, "Settings (what", "Knobs (what", 1)
	if Normalize(one, nil) == Normalize(other, nil) {
		t.Error("a changed heading after the waits compares the same")
	}
}
