package executor

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// TestEachHoldsWorkersInFlight: a batch larger than Workers has Workers
// writes in flight at once and never more, and every write runs.
func TestEachHoldsWorkersInFlight(t *testing.T) {
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	inFlight, most, ran := 0, 0, 0
	release := false
	n := 3 * Workers
	done := make(chan []error)
	go func() {
		done <- each(context.Background(), n, func(context.Context, int) error {
			mu.Lock()
			defer mu.Unlock()
			inFlight++
			ran++
			most = max(most, inFlight)
			cond.Broadcast()
			for !release {
				cond.Wait()
			}
			inFlight--
			return nil
		})
	}()
	// Hold the first writes until the batch has Workers of them in
	// flight: it must get there, and (the bound) no further, however long
	// the scheduler runs the rest of the batch meanwhile.
	mu.Lock()
	for inFlight < Workers {
		cond.Wait()
	}
	mu.Unlock()
	for range 1000 {
		runtime.Gosched()
	}
	mu.Lock()
	release = true
	cond.Broadcast()
	mu.Unlock()
	<-done
	if most != Workers {
		t.Errorf("at most %d writes in flight, want %d (Workers)", most, Workers)
	}
	if ran != n {
		t.Errorf("%d writes ran, want %d", ran, n)
	}
}

// TestFirstErrorInOrder: the batch's error is the first by index, as a
// loop in order would have returned, and the writes after it still ran.
func TestFirstErrorInOrder(t *testing.T) {
	var mu sync.Mutex
	ran := map[int]bool{}
	errs := each(context.Background(), 40, func(_ context.Context, i int) error {
		mu.Lock()
		ran[i] = true
		mu.Unlock()
		if i == 7 || i == 30 {
			return fmt.Errorf("write %d", i)
		}
		return nil
	})
	ok, err := firstError(errs)
	if err == nil || err.Error() != "write 7" {
		t.Fatalf("error = %v, want write 7's", err)
	}
	if ok[7] || ok[30] || !ok[8] || !ok[39] || len(ran) != 40 {
		t.Errorf("written %v, ran %d of 40: want all but 7 and 30 written", ok, len(ran))
	}
	if _, err := firstError(each(context.Background(), 0, nil)); err != nil {
		t.Errorf("an empty batch: %v", err)
	}
}
