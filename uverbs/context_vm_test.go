package uverbs_test

import (
	"errors"
	"testing"

	"github.com/purerdma/rdma/uverbs"
)

// openContext opens the current fabric's first device and closes it at
// cleanup.
func openContext(t *testing.T) *uverbs.Context {
	t.Helper()
	d := fabricDevice(t, 0)
	c, err := d.Open(nil)
	if err != nil {
		t.Fatalf("Open(%s): %v", d.Name, err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil && !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("Context.Close: %v", err)
		}
	})
	return c
}

func TestOpenClose(t *testing.T) {
	c := openContext(t)
	if c.NumCompVectors() < 1 {
		t.Errorf("NumCompVectors = %d", c.NumCompVectors())
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	if _, err := c.AllocPD(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("AllocPD on a closed context = %v, want ErrClosed", err)
	}
}

func TestPDLifecycle(t *testing.T) {
	c := openContext(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if err := pd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second PD.Close = %v, want ErrClosed", err)
	}
}

// TestContextCloseReleasesChildren leaves objects open: Context.Close must
// destroy them, dependents first.
func TestContextCloseReleasesChildren(t *testing.T) {
	c := openContext(t)
	td, err := c.AllocTD()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.AllocPD(); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	_ = td
	if err := c.Close(); err != nil {
		t.Fatalf("Close with open children: %v", err)
	}
	if err := ch.Close(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("channel Close after context Close = %v, want ErrClosed", err)
	}
}
