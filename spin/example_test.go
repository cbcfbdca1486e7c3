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
//
//purerdma:race
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
	// The loop ran about 20 ms and yielded about every 5 ms on the way;
	// how many times depends on the machine's load, so it is not
	// printed here (w.Yields reports it).
	fmt.Println("ready")
	// Output: ready
}

// A loop whose flag never comes ends when its context does.
func Example_deadline() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	w := spin.New(ctx, spin.DefaultInterval)
	for {
		if err := w.Spin(); err != nil {
			fmt.Println("gave up:", err)
			return
		}
	}
	// Output: gave up: context deadline exceeded
}
