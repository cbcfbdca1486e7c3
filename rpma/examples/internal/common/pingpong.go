package common

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/purerdma/rdma/rpma"
	"github.com/purerdma/rdma/uverbs"
)

// The messages of the ping-pong examples (common-messages-ping-pong.h,
// receive-completion-queue-common.h): one uint64 counter in host byte
// order, and IMDone to say goodbye.
const (
	MsgSize = 8
	IMDone  = ^uint64(0)
	// maxNWC is how many completions a round expects at most (a send
	// and a receive).
	maxNWC = 2
)

// Uint64 reads a message.
func Uint64(b []byte) uint64 { return binary.NativeEndian.Uint64(b) }

// PutUint64 writes a message.
func PutUint64(b []byte, v uint64) { binary.NativeEndian.PutUint64(b, v) }

// Completions says which of a ping-pong round's completions arrived.
type Completions struct {
	Send, Recv bool
}

// Validate checks one completion of a round (validate_wc): it
// succeeded, and a receive is the one of the buffer whose op context
// is recv and carries a whole message.
func (c *Completions) Validate(wc *uverbs.WorkCompletion, recv uint64) error {
	if err := rpma.CompletionErr(wc); err != nil {
		f := "recv"
		if wc.Opcode == uverbs.WCSend {
			f = "send"
		}
		fmt.Fprintf(os.Stderr, "rpma_%s() failed: %v\n", f, wc.Status)
		return err
	}
	switch wc.Opcode {
	case uverbs.WCSend:
		c.Send = true
	case uverbs.WCRecv:
		if wc.WRID != recv || wc.ByteLen != MsgSize {
			fmt.Fprintf(os.Stderr, "received completion is not as expected (0x%X != 0x%X [wc.wr_id] || %d != %d [wc.byte_len])\n",
				wc.WRID, recv, wc.ByteLen, MsgSize)
			return ErrUnexpected
		}
		c.Recv = true
	}
	return nil
}

// WaitAndProcess waits on cq until both completions of the round
// arrived (wait_and_process_completions).
func (c *Completions) WaitAndProcess(ctx context.Context, cq *rpma.CQ, recv uint64) error {
	var wc [maxNWC]uverbs.WorkCompletion
	for !c.Send || !c.Recv {
		if err := cq.Wait(ctx); err != nil {
			return err
		}
		n, err := cq.GetWC(wc[:])
		if err != nil && !errors.Is(err, rpma.ErrNoCompletion) {
			return err
		}
		for i := range n {
			if err := c.Validate(&wc[i], recv); err != nil {
				return err
			}
		}
	}
	return nil
}

// SendDone sends IMDone from send (registered as sendMR) and waits for
// the send to complete with wait, so the caller may disconnect at once.
//
// C's clients post the goodbye unsignaled and disconnect right away.
// Where rxe sends a user QP's work requests from a workqueue (6.12;
// 6.1 sends them in the doorbell's system call), the disconnect moves
// the QP to the error state before the message left, the message is
// flushed, and the server waits for it forever. A send that completed
// was acknowledged by the server, so waiting closes that race; the
// bytes on the wire are the same.
func SendDone(conn *rpma.Conn, send []byte, sendMR *rpma.MR, wait func(*uverbs.WorkCompletion) error) error {
	PutUint64(send, IMDone)
	if err := conn.Send(sendMR, 0, MsgSize, rpma.CompletionAlways, 0); err != nil {
		return err
	}
	var wc uverbs.WorkCompletion
	return wait(&wc)
}
