package toolrun

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Attempt is one run of a test's body under Attempts. It is the body's
// testing.TB: failures, skips and cleanups stay with the attempt until
// Attempts has judged it, so a run lost to a race that is not the code
// under test's (siw's accept race stranded it, docs/testing.md, or the
// body called Raced or Lost) can be thrown away and run again; logs go
// to the test at once. Everything else is the test's.
type Attempt struct {
	testing.TB
	ctx     context.Context
	cancel  context.CancelCauseFunc
	limit   time.Duration
	strands bool

	mu       sync.Mutex
	msgs     []string // the failures, in order
	failed   bool
	skipped  bool
	lost     string // why a race ended the attempt (Raced, Lost)
	cleanups []func()
	dog      *Watchdog
}

// The causes of an attempt's context's end: its watchdog ended the run,
// or the attempt is over.
var (
	errWatchdog = errors.New("the watchdog ended the attempt")
	errOver     = errors.New("the attempt is over")
)

// Context is the attempt's context: the watchdog cancels it when the
// run outlives its time or is stranded, and it ends with the attempt.
func (a *Attempt) Context() context.Context { return a.ctx }

// Watch starts the attempt's watchdog on the run's port (the port a
// server listens on, known once it listens): it ends the run (cancels
// Context) when it outlives the time given to Attempts, or, on iWARP,
// at once when siw leaves bytes unread on a socket of port. Watch is
// called at most once per attempt.
func (a *Attempt) Watch(port int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dog != nil {
		panic("toolrun: Attempt.Watch called twice")
	}
	a.dog = Watch(a.limit, port, a.strands, func() { a.cancel(errWatchdog) })
}

func (a *Attempt) record(fatal bool, msg string) {
	loc := ""
	if _, file, line, ok := runtime.Caller(2); ok {
		loc = fmt.Sprintf("%s:%d: ", filepath.Base(file), line)
	}
	a.mu.Lock()
	a.failed = true
	if msg != "" {
		a.msgs = append(a.msgs, loc+msg)
	}
	a.mu.Unlock()
	if fatal {
		runtime.Goexit()
	}
}

// The failing methods of testing.TB, kept by the attempt. FailNow and
// the Fatal and Skip methods end the body's goroutine, as the test's
// own do.

func (a *Attempt) Error(args ...any) {
	a.record(false, strings.TrimSuffix(fmt.Sprintln(args...), "\n"))
}
func (a *Attempt) Errorf(format string, args ...any) { a.record(false, fmt.Sprintf(format, args...)) }
func (a *Attempt) Fatal(args ...any)                 { a.record(true, strings.TrimSuffix(fmt.Sprintln(args...), "\n")) }
func (a *Attempt) Fatalf(format string, args ...any) { a.record(true, fmt.Sprintf(format, args...)) }
func (a *Attempt) Fail()                             { a.record(false, "") }
func (a *Attempt) FailNow()                          { a.record(true, "") }

func (a *Attempt) Failed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failed
}

// Raced ends the attempt as lost to siw's connect race
// (docs/providers.md, "siw": the accepting side spoke before the
// connecting side had read the MPA reply, and the connect failed
// there). why says what showed it. The attempt is thrown away and run
// again, as a stranded one is, up to MaxAttempts times. On a fabric
// without the race (Attempts' strands false) Raced fails the attempt
// instead. Like Fatal, it ends the body's goroutine.
func (a *Attempt) Raced(why string) {
	if !a.strands {
		a.record(true, "not iWARP, so not siw's connect race: "+why)
	}
	a.Lost(why)
}

// Lost ends the attempt as lost to a race that is not the code under
// test's, which the body recognised from what the run left: why says
// what the race is and what showed it. The attempt is thrown away and
// run again, up to MaxAttempts times, and every attempt lost fails the
// test. The body decides on which fabric its race can happen. Like
// Fatal, it ends the body's goroutine.
func (a *Attempt) Lost(why string) {
	a.mu.Lock()
	a.lost = why
	a.mu.Unlock()
	runtime.Goexit()
}

func (a *Attempt) skip(msg string) {
	a.mu.Lock()
	a.skipped = true
	if msg != "" {
		a.msgs = append(a.msgs, msg)
	}
	a.mu.Unlock()
	runtime.Goexit()
}

func (a *Attempt) Skip(args ...any)                 { a.skip(strings.TrimSuffix(fmt.Sprintln(args...), "\n")) }
func (a *Attempt) Skipf(format string, args ...any) { a.skip(fmt.Sprintf(format, args...)) }
func (a *Attempt) SkipNow()                         { a.skip("") }

func (a *Attempt) Skipped() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.skipped
}

// Cleanup registers f to run when the attempt ends (last added, first
// run), before it is judged.
func (a *Attempt) Cleanup(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cleanups = append(a.cleanups, f)
}

// run runs body and then the cleanups, each in a goroutine of its own
// (a Fatal in one ends only that one), and stops the watchdog.
func (a *Attempt) run(body func(a *Attempt)) {
	inOwn := func(f func()) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			f()
		}()
		<-done
	}
	inOwn(func() { body(a) })
	for {
		a.mu.Lock()
		n := len(a.cleanups)
		if n == 0 {
			a.mu.Unlock()
			break
		}
		f := a.cleanups[n-1]
		a.cleanups = a.cleanups[:n-1]
		a.mu.Unlock()
		inOwn(f)
	}
	a.cancel(errOver)
	a.mu.Lock()
	dog := a.dog
	a.mu.Unlock()
	if dog != nil {
		dog.Stop()
	}
}

// Attempts runs body as one test, on a new Attempt each time, until a
// run is not lost: a stranded run (its watchdog saw bytes siw does not
// read; strands says the fabric is iWARP) or one whose body called
// Raced or Lost is logged with what it reported and run again, up to
// MaxAttempts times. The run that counts passes
// its failures and skip to t; every attempt lost fails t. limit is the
// time a run may take once it calls Watch. what names the run in the
// log.
//
// The body's context is a.Context(); it must call a.Watch with its
// run's port once it knows it, and end what it started through
// a.Cleanup, so that the next attempt starts clean.
func Attempts(t testing.TB, what string, limit time.Duration, strands bool, body func(a *Attempt)) {
	t.Helper()
	for n := 1; ; n++ {
		ctx, cancel := context.WithCancelCause(context.Background())
		a := &Attempt{TB: t, ctx: ctx, cancel: cancel, limit: limit, strands: strands}
		a.run(body)
		if again(t, n, what, a.lost, a.dog, strings.Join(a.msgs, "\n")) {
			continue
		}
		a.judge(t, what)
		return
	}
}

// judge passes the attempt's verdict to t.
func (a *Attempt) judge(t testing.TB, what string) {
	t.Helper()
	if a.dog != nil && a.dog.TimedOut() {
		a.msgs = append(a.msgs, fmt.Sprintf("the run of %s did not end within %v\n%s", what, a.limit, a.dog.Report()))
		a.failed = true
	}
	for _, m := range a.msgs {
		if a.failed {
			t.Error(m)
		} else {
			t.Log(m)
		}
	}
	switch {
	case a.failed:
		t.FailNow()
	case a.skipped:
		t.SkipNow()
	}
}
