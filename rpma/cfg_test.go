package rpma_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/purerdma/rdma/rpma"
)

func TestConnCfgDefaults(t *testing.T) {
	c := rpma.NewConnCfg()
	if c.Timeout() != time.Second || c.CQSize() != 10 || c.SQSize() != 10 || c.RQSize() != 10 ||
		c.RCQSize() != 0 || c.CompletionChannel() || c.SRQ() != nil || c.FlushMethod() != rpma.FlushAuto {
		t.Errorf("defaults: %v %d %d %d %d %v %v %v", c.Timeout(), c.CQSize(), c.SQSize(), c.RQSize(), c.RCQSize(),
			c.CompletionChannel(), c.SRQ(), c.FlushMethod())
	}
	c.SetCQSize(1)
	c.SetRCQSize(2)
	c.SetSQSize(3)
	c.SetRQSize(4)
	c.SetCompletionChannel(true)
	if err := c.SetTimeout(5 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := c.SetFlushMethod(rpma.FlushNative); err != nil {
		t.Fatal(err)
	}
	if c.CQSize() != 1 || c.RCQSize() != 2 || c.SQSize() != 3 || c.RQSize() != 4 || !c.CompletionChannel() ||
		c.Timeout() != 5*time.Millisecond || c.FlushMethod() != rpma.FlushNative {
		t.Error("setters did not stick")
	}
	if err := c.SetTimeout(0); !errors.Is(err, rpma.ErrInvalid) {
		t.Errorf("SetTimeout(0) = %v", err)
	}
	if err := c.SetFlushMethod(7); !errors.Is(err, rpma.ErrInvalid) {
		t.Errorf("SetFlushMethod(7) = %v", err)
	}
	s := rpma.NewSRQCfg()
	if s.RQSize() != 10 || s.RCQSize() != 10 {
		t.Errorf("SRQ defaults %d %d", s.RQSize(), s.RCQSize())
	}
	s.SetRQSize(7)
	s.SetRCQSize(0)
	if s.RQSize() != 7 || s.RCQSize() != 0 {
		t.Error("SRQ setters did not stick")
	}
}

func TestConnEventStrings(t *testing.T) {
	want := map[rpma.ConnEvent]string{
		rpma.ConnUndefined: "Undefined connection event", rpma.ConnEstablished: "Connection established",
		rpma.ConnClosed: "Connection closed", rpma.ConnLost: "Connection lost",
		rpma.ConnRejected: "Connection rejected", rpma.ConnUnreachable: "Connection unreachable",
		17: "Unknown connection event",
	}
	for e, s := range want {
		if e.String() != s {
			t.Errorf("%d: %q, want %q", int(e), e.String(), s)
		}
	}
}

func TestLogThresholds(t *testing.T) {
	defer rpma.SetLogger(nil)
	p, _ := rpma.GetLogThreshold(rpma.LogThresholdPrimary)
	a, _ := rpma.GetLogThreshold(rpma.LogThresholdAux)
	defer rpma.SetLogThreshold(rpma.LogThresholdPrimary, p)
	defer rpma.SetLogThreshold(rpma.LogThresholdAux, a)
	if p != rpma.LogWarning || a != rpma.LogDisabled {
		t.Errorf("defaults %v %v, want WARNING DISABLED", p, a)
	}
	var buf bytes.Buffer
	rpma.SetLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	// An INFO message of the library: PeerCfgFromDescriptor logs one.
	rpma.PeerCfgFromDescriptor([]byte{1})
	if buf.Len() != 0 {
		t.Errorf("INFO logged under a WARNING threshold: %s", buf.String())
	}
	if err := rpma.SetLogThreshold(rpma.LogThresholdPrimary, rpma.LogDebug); err != nil {
		t.Fatal(err)
	}
	rpma.PeerCfgFromDescriptor([]byte{1})
	if s := buf.String(); !strings.Contains(s, "Direct Write To PMem is supported") || !strings.Contains(s, "rpma_level=INFO") {
		t.Errorf("logged %q", s)
	}
	for _, bad := range []struct {
		th rpma.LogThreshold
		l  rpma.LogLevel
	}{{2, rpma.LogDebug}, {rpma.LogThresholdPrimary, 6}, {rpma.LogThresholdAux, -2}} {
		if err := rpma.SetLogThreshold(bad.th, bad.l); !errors.Is(err, rpma.ErrInvalid) {
			t.Errorf("SetLogThreshold(%d, %d) = %v", bad.th, bad.l, err)
		}
	}
	if _, err := rpma.GetLogThreshold(5); !errors.Is(err, rpma.ErrInvalid) {
		t.Errorf("GetLogThreshold(5) = %v", err)
	}
}
