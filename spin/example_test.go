package spin_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/purerdma/rdma/spin"
)

// A loop waiting for a flag another goroutine sets, as a loop waits for
// a completion or for the last byte of a peer's RDMA write.
func Example() {
	var ready atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond)
		ready.Store(true)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := spin.New(ctx, spin.DefaultInterval)
	for !ready.Load() {
		if err := w.Spin(); err != nil {
			fmt.Println("gave up:", err)
			return
		}
	}
	fmt.Println("ready, after yielding to the scheduler:", w.Yields() > 0)
	// Output: ready, after yielding to the scheduler: true
}
