package provider

import (
	"sync"
	"testing"
)

// TestQLock: goroutines that share one QLock, more of them than
// threads, each add to a counter the lock guards and read it back; no
// increment is lost, and nobody sees another's change in between (under
// -race, the race detector checks the lock orders the accesses).
//
//purerdma:race
func TestQLock(t *testing.T) {
	var (
		l     QLock
		count int
		wg    sync.WaitGroup
		bad   = make(chan string, 1)
	)
	const workers, rounds = 8, 2000
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l.Lock()
				count++
				c := count
				for range 10 { // hold it a while, so others wait
					if count != c {
						select {
						case bad <- "the count changed under the lock":
						default:
						}
					}
				}
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	close(bad)
	if msg, ok := <-bad; ok {
		t.Fatal(msg)
	}
	if count != workers*rounds {
		t.Fatalf("count %d, want %d", count, workers*rounds)
	}
}
