package apicost

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Case is one kind of write: the objects it patches and how each patch
// changes one.
type Case struct {
	Name string
	// Object returns the i-th object to create (with its status, if any).
	Object func(i int) *unstructured.Unstructured
	// Change changes an object for the seq-th patch; the patch sent is the
	// JSON merge patch from before to after (client.MergeFrom, as the
	// agent and the manager compute theirs).
	Change func(u *unstructured.Unstructured, seq int)
	// Status sends the patch to the status subresource.
	Status bool
}

// Prepared is a Case's objects, created on a Server.
type Prepared struct {
	Case
	objs []*unstructured.Unstructured
	seq  int
}

// Prepare creates n objects of c (a status written through the status
// subresource) and returns them for Patch.
func (s *Server) Prepare(ctx context.Context, c Case, n int) (*Prepared, error) {
	p := &Prepared{Case: c}
	for i := 0; i < n; i++ {
		u := c.Object(i)
		st, hasStatus := u.Object["status"]
		if err := s.Client.Create(ctx, u); err != nil {
			return nil, fmt.Errorf("%s: create %s: %w", c.Name, u.GetName(), err)
		}
		if hasStatus {
			u.Object["status"] = st
			if err := s.Client.Status().Update(ctx, u); err != nil {
				return nil, fmt.Errorf("%s: status of %s: %w", c.Name, u.GetName(), err)
			}
		}
		p.objs = append(p.objs, u)
	}
	return p, nil
}

// Sample is one measured batch of patches.
type Sample struct {
	Patches int
	// CPU is the API server's CPU time over the batch.
	CPU time.Duration
	// Wall is the batch's elapsed time; PatchBytes the mean patch size.
	Wall       time.Duration
	PatchBytes int
}

// PerThousand is the API server CPU seconds per 1000 patches.
func (s Sample) PerThousand() float64 {
	return s.CPU.Seconds() * 1000 / float64(s.Patches)
}

// Patch sends m patches spread over the prepared objects from workers
// concurrent clients (each owns every workers-th object and patches its
// objects in turn), and measures the API server's CPU over them.
func (s *Server) Patch(ctx context.Context, p *Prepared, m, workers int) (Sample, error) {
	var (
		mu    sync.Mutex
		first error
		bytes int
		wg    sync.WaitGroup
	)
	if workers <= 0 || len(p.objs)%workers != 0 {
		return Sample{}, fmt.Errorf("%s: %d objects do not split over %d workers", p.Name, len(p.objs), workers)
	}
	base := p.seq
	p.seq += m
	c0, err := s.CPU()
	if err != nil {
		return Sample{}, err
	}
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sum := 0
			var werr error
			// Patch k goes to object k mod n: worker w sends the patches
			// whose object it owns.
			for k := w; k < m && werr == nil; k += workers {
				var n int
				n, werr = s.patchOne(ctx, p.Case, p.objs[k%len(p.objs)], base+k)
				sum += n
			}
			mu.Lock()
			bytes += sum
			if werr != nil && first == nil {
				first = werr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	c1, err := s.CPU()
	if err != nil {
		return Sample{}, err
	}
	if first != nil {
		return Sample{}, first
	}
	return Sample{Patches: m, CPU: c1 - c0, Wall: wall, PatchBytes: bytes / m}, nil
}

func (s *Server) patchOne(ctx context.Context, c Case, u *unstructured.Unstructured, seq int) (int, error) {
	before := u.DeepCopy()
	c.Change(u, seq)
	patch := client.MergeFrom(before)
	data, err := patch.Data(u)
	if err != nil {
		return 0, err
	}
	if c.Status {
		err = s.Client.Status().Patch(ctx, u, patch)
	} else {
		err = s.Client.Patch(ctx, u, patch)
	}
	if err != nil {
		return 0, fmt.Errorf("%s: patch %s: %w", c.Name, u.GetName(), err)
	}
	return len(data), nil
}

// Stats is the median, min and max of some figures.
type Stats struct{ Median, Min, Max float64 }

// Summarize returns the median, min and max of v.
func Summarize(v []float64) Stats {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return Stats{}
	}
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stats{Median: med, Min: s[0], Max: s[len(s)-1]}
}

func (s Stats) String() string { return fmt.Sprintf("%.2f [%.2f–%.2f]", s.Median, s.Min, s.Max) }
