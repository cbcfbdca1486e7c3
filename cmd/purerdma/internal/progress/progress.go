// Package progress is the line a long purerdma run (pingpong, bench)
// shows on stderr when stderr is a terminal: rewritten in place a few
// times a second and erased at the end; when stderr is a file or a pipe
// there is none.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Line is the line a long run shows on a terminal: rewritten in place
// (a carriage return, the text, an erase to the end of the line) at
// most every Every, and erased by Done. New returns nil when stderr is
// no terminal, and a nil *Line does nothing, so piped or redirected
// output never holds progress text.
type Line struct {
	mu    sync.Mutex
	w     io.Writer
	next  time.Time
	calls int
	shown bool
}

// Every is how often the line may change: a few times a second.
const Every = 250 * time.Millisecond

// isTerminal reports whether w is a character device, such as a
// terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// New returns a progress line on stderr if it is a terminal, else nil.
func New(stderr io.Writer) *Line {
	if !isTerminal(stderr) {
		return nil
	}
	return &Line{w: stderr}
}

// Tick is Update for hot loops: it looks at the clock only every 64th
// call, and formats only when the line is due.
func (p *Line) Tick(format string, args ...any) {
	if p == nil {
		return
	}
	p.calls++
	if p.calls&63 != 0 {
		return
	}
	p.Update(format, args...)
}

// Update rewrites the line if Every has passed since the last
// time.
func (p *Line) Update(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Before(p.next) {
		return
	}
	p.next = now.Add(Every)
	fmt.Fprintf(p.w, "\r"+format+"\x1b[K", args...)
	p.shown = true
}

// Done erases the line, if one was shown.
func (p *Line) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		io.WriteString(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// Ticker updates the line every Every with what status says,
// on its own goroutine, until the returned stop, which erases it: for
// runs whose loops must not be slowed by a check of the clock.
func (p *Line) Ticker(status func(elapsed time.Duration) string) (stop func()) {
	if p == nil {
		return func() {}
	}
	start := time.Now()
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(Every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				p.Update("%s", status(time.Since(start)))
			}
		}
	}()
	return func() {
		close(quit)
		<-exited
		p.Done()
	}
}
