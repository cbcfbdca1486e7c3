package clike

import (
	"errors"
	"fmt"
	"os"

	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// VerbErr is the VERB_ERR macro that the chapter 8 listings (apm, mc,
// srq) each define the same way: "<verb> returned <ret> errno <errno>"
// on stderr. Each port binds it to its own verbErr, as each listing
// defines its own macro.
func VerbErr(verb string, ret, errno int) {
	fmt.Fprintf(os.Stderr, "%s returned %d errno %d\n", verb, ret, errno)
}

// EventStr is rdma_event_str: the event type's name as librdmacm spells
// it.
func EventStr(t rdmacm.EventType) string { return "RDMA_CM_EVENT_" + t.String() }

// CMErrno is the errno librdmacm leaves for err: ECONNREFUSED for a
// rejected connection (as its synchronous rdma_connect and rdma_accept
// report one), else the kernel's, else EINVAL.
func CMErrno(err error) int {
	if errors.Is(err, rdmacm.ErrRejected) {
		return 111
	}
	return Errno(err, 22)
}

// IsWCStatus reports whether err is only a completion's error status,
// which librdmacm's rdma_get_send_comp and rdma_get_recv_comp return as
// a completion (the listings do not look at it).
func IsWCStatus(err error) bool {
	var s uverbs.WCStatus
	return errors.As(err, &s)
}
