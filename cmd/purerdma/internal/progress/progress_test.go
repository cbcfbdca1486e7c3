package progress

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// TestProgressNotOnPipes: output that is no terminal gets no progress
// line, whatever the run does.
func TestProgressNotOnPipes(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, out := range []io.Writer{w, f, &bytes.Buffer{}} {
		if isTerminal(out) {
			t.Errorf("%T is taken for a terminal", out)
		}
	}
	p := New(w)
	if p != nil {
		t.Fatalf("New(a pipe) = %v, want nil", p)
	}
	for range 1000 {
		p.Tick("x %d", 1)
	}
	p.Update("y")
	p.Ticker(func(time.Duration) string { return "z" })()
	p.Done()
	w.Close()
	var got bytes.Buffer
	got.ReadFrom(r)
	if got.Len() != 0 {
		t.Errorf("progress wrote %q to a pipe", got.String())
	}
}

// TestProgressLine checks the terminal line: carriage-return updated,
// rate limited, erased at the end.
func TestProgressLine(t *testing.T) {
	var b bytes.Buffer
	p := &Line{w: &b}
	p.Update("pingpong rc: %d of %d", 1, 10)
	p.Update("pingpong rc: %d of %d", 2, 10) // too soon: not shown
	for range 63 {
		p.Tick("tick")
	}
	if want := "\rpingpong rc: 1 of 10\x1b[K"; b.String() != want {
		t.Errorf("line = %q, want %q", b.String(), want)
	}
	p.Done()
	if !strings.HasSuffix(b.String(), "\r\x1b[K") {
		t.Errorf("done did not erase the line: %q", b.String())
	}
	b.Reset()
	p.Done()
	if b.Len() != 0 {
		t.Errorf("a second done wrote %q", b.String())
	}
	stop := p.Ticker(func(d time.Duration) string { return "bench write_lat: running" })
	deadline := time.Now().Add(10 * time.Second) // generous: only "does not hang"
	for !strings.Contains(readLocked(p, &b), "running") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if s := b.String(); !strings.HasPrefix(s, "\rbench write_lat: running\x1b[K") || !strings.HasSuffix(s, "\r\x1b[K") {
		t.Errorf("ticker wrote %q", s)
	}
}

func readLocked(p *Line, b *bytes.Buffer) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return b.String()
}
