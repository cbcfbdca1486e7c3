package rpma_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

func TestCodes(t *testing.T) {
	for _, tc := range []struct {
		code rpma.Code
		err  error
		text string
	}{
		{-100000, rpma.ErrUnknown, "Unknown error"},
		{-100001, rpma.ErrNotSupported, "Not supported"},
		{-100002, rpma.ErrProvider, "Provider error occurred"},
		{-100003, rpma.ErrNoMemory, "Out of memory"},
		{-100004, rpma.ErrInvalid, "Invalid argument"},
		{-100005, rpma.ErrNoCompletion, "No next completion available"},
		{-100006, rpma.ErrNoEvent, "No next event available"},
		{-100007, rpma.ErrAgain, "Temporary error"},
		{-100008, rpma.ErrSharedChannel, "Completion channel is shared"},
		{-100009, rpma.ErrNotSharedChannel, "Completion channel is not shared"},
	} {
		if got := rpma.ErrorString(int(tc.code)); got != tc.text {
			t.Errorf("ErrorString(%d) = %q, want %q", tc.code, got, tc.text)
		}
		if tc.code.Err() != tc.err {
			t.Errorf("Code(%d).Err() = %v", tc.code, tc.code.Err())
		}
		wrapped := fmt.Errorf("context: %w", &rpma.Error{Op: "x", Class: tc.err, Err: syscall.EIO})
		if rpma.CodeOf(wrapped) != tc.code || !errors.Is(wrapped, syscall.EIO) {
			t.Errorf("CodeOf(%v) = %d, want %d (and EIO underneath)", wrapped, rpma.CodeOf(wrapped), tc.code)
		}
	}
	if rpma.CodeOf(nil) != 0 || rpma.ErrorString(0) != "Success" || rpma.CodeOf(errors.New("x")) != rpma.CodeUnknown {
		t.Error("code 0 / foreign error")
	}
}

func TestCompletionErr(t *testing.T) {
	ok := uverbs.WorkCompletion{Status: uverbs.WCSuccess}
	if err := rpma.CompletionErr(&ok); err != nil {
		t.Errorf("success: %v", err)
	}
	bad := uverbs.WorkCompletion{WRID: 0x42, Status: uverbs.WCRemAccessErr, Opcode: uverbs.WCRDMAWrite}
	err := rpma.CompletionErr(&bad)
	var ce *rpma.CompletionError
	if !errors.As(err, &ce) || ce.OpContext != 0x42 || !errors.Is(err, uverbs.WCRemAccessErr) {
		t.Fatalf("CompletionErr = %v", err)
	}
	if rpma.CompletionErr(nil) == nil {
		t.Error("nil completion: no error")
	}
}

// TestErrorIsAllocates: matching an error's class allocates nothing, so
// a loop over an empty CQ stays allocation-free.
func TestErrorIsAllocates(t *testing.T) {
	err := error(&rpma.Error{Op: "cq get wc", Class: rpma.ErrNoCompletion})
	if n := testing.AllocsPerRun(100, func() {
		if !errors.Is(err, rpma.ErrNoCompletion) {
			panic("no match")
		}
	}); n != 0 {
		t.Errorf("errors.Is allocated %v times", n)
	}
	wrapped := &rpma.Error{Op: "x", Class: rpma.ErrProvider, Err: syscall.EIO}
	if !errors.Is(wrapped, rpma.ErrProvider) || !errors.Is(wrapped, syscall.EIO) || errors.Is(wrapped, rpma.ErrInvalid) {
		t.Error("class or cause not matched, or a wrong class matched")
	}
}
