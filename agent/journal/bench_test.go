package journal

import (
	"fmt"
	"testing"
)

// BenchmarkLookupPass is the journal work of one apply pass and one revert
// over n knobs, without the kernel I/O: Record every knob (first apply),
// Find each three times (settled, refused and written checks), then Drop
// every entry newest first (revert). The lookups are indexed, so ns/op
// grows linearly with n: compare the sub-benchmarks' ns/op.
func BenchmarkLookupPass(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("sysctl/bench.knob_%d", i)
		}
		b.Run(fmt.Sprintf("knobs=%dk", n/1000), func(b *testing.B) {
			for b.Loop() {
				j := New("boot")
				for _, id := range ids {
					j.Record(id, "proc/sys/"+id, "1", "1", "0")
				}
				for range 3 {
					for _, id := range ids {
						if j.Find(id) == nil {
							b.Fatalf("lost %s", id)
						}
					}
				}
				for i := len(ids) - 1; i >= 0; i-- {
					j.Drop(ids[i])
				}
				if len(j.Entries) != 0 {
					b.Fatalf("%d entries left", len(j.Entries))
				}
			}
		})
	}
}
