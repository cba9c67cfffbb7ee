package apply

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/knob"
)

// BenchmarkApplyPass is one steady-state Apply pass (journal loaded, every
// knob read, planned and found at its journaled, verified value) over n
// knobs in a temp-dir root. Journal lookups are indexed, so ns/op grows
// linearly with n: compare the sub-benchmarks' ns/op.
func BenchmarkApplyPass(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("knobs=%dk", n/1000), func(b *testing.B) {
			root := testroot.New(b, nil)
			dir := root.Proc("sys", "bench")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			knobs := make([]knob.Knob, n)
			for i := range knobs {
				p := filepath.Join(dir, fmt.Sprint(i))
				if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
					b.Fatal(err)
				}
				knobs[i] = knob.Knob{ID: fmt.Sprintf("bench/%d", i), Path: p, Desired: "0"}
			}
			e := engine(root)
			if rep, err := e.Apply(Meta{Profile: "p"}, knobs); err != nil || rep.Written != n {
				b.Fatalf("first apply: written %d of %d, %v", rep.Written, n, err)
			}
			b.ResetTimer()
			for b.Loop() {
				rep, err := e.Apply(Meta{Profile: "p"}, knobs)
				if err != nil || rep.Written != 0 || len(rep.Results) != n {
					b.Fatalf("steady pass: written %d, %d results, %v", rep.Written, len(rep.Results), err)
				}
			}
		})
	}
}

// BenchmarkFirstPassSettled is a first Apply pass over n knobs the kernel
// already holds at the desired value: each is journaled as settled
// (noteSettled), none written. ns/op grows linearly with n: every new
// entry is indexed as it is added.
func BenchmarkFirstPassSettled(b *testing.B) {
	for _, n := range []int{10_000, 40_000} {
		b.Run(fmt.Sprintf("knobs=%dk", n/1000), func(b *testing.B) {
			root := testroot.New(b, nil)
			dir := root.Proc("sys", "bench")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			knobs := make([]knob.Knob, n)
			for i := range knobs {
				p := filepath.Join(dir, fmt.Sprint(i))
				if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
					b.Fatal(err)
				}
				knobs[i] = knob.Knob{ID: fmt.Sprintf("bench/%d", i), Path: p, Desired: "0"}
			}
			e := engine(root)
			for b.Loop() {
				b.StopTimer()
				_ = os.Remove(filepath.Join(root.StateDir(), "journal.json"))
				b.StartTimer()
				rep, err := e.Apply(Meta{Profile: "p"}, knobs)
				if err != nil || rep.Written != 0 || len(rep.Results) != n {
					b.Fatalf("first pass: written %d, %d results, %v", rep.Written, len(rep.Results), err)
				}
			}
		})
	}
}
