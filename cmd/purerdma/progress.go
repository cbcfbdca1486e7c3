package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress is the line a long run shows on a terminal: rewritten in
// place (a carriage return, the text, an erase to the end of the line)
// at most every progressEvery, and erased by done. newProgress returns
// nil when stderr is no terminal, and a nil *progress does nothing, so
// piped or redirected output never holds progress text.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	next  time.Time
	calls int
	shown bool
}

// progressEvery is how often the line may change: a few times a second.
const progressEvery = 250 * time.Millisecond

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

// newProgress returns a progress line on stderr if it is a terminal,
// else nil.
func newProgress(stderr io.Writer) *progress {
	if !isTerminal(stderr) {
		return nil
	}
	return &progress{w: stderr}
}

// tick is update for hot loops: it looks at the clock only every 64th
// call, and formats only when the line is due.
func (p *progress) tick(format string, args ...any) {
	if p == nil {
		return
	}
	p.calls++
	if p.calls&63 != 0 {
		return
	}
	p.update(format, args...)
}

// update rewrites the line if progressEvery has passed since the last
// time.
func (p *progress) update(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if now.Before(p.next) {
		return
	}
	p.next = now.Add(progressEvery)
	fmt.Fprintf(p.w, "\r"+format+"\x1b[K", args...)
	p.shown = true
}

// done erases the line, if one was shown.
func (p *progress) done() {
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

// ticker updates the line every progressEvery with what status says,
// on its own goroutine, until the returned stop, which erases it: for
// runs whose loops must not be slowed by a check of the clock.
func (p *progress) ticker(status func(elapsed time.Duration) string) (stop func()) {
	if p == nil {
		return func() {}
	}
	start := time.Now()
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				p.update("%s", status(time.Since(start)))
			}
		}
	}()
	return func() {
		close(quit)
		<-exited
		p.done()
	}
}
