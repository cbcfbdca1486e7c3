package ucma

import (
	"errors"
	"unsafe"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"golang.org/x/sys/unix"
)

// TryGetEvent takes the next event if one is queued, without waiting
// (RDMA_USER_CM_CMD_GET_EVENT on the non-blocking fd): ok is false when
// none is. It does not take the poller's waiter slot, so it may run
// while a GetEvent waits; rdmacm takes care that it does not.
func (f *File) TryGetEvent(resp *abi.UCMEventResp) (ok bool, err error) {
	s, err := sys.GetScratch()
	if err != nil {
		return false, err
	}
	defer s.Release()
	kresp := sys.ScratchAt[abi.UCMEventResp](s, respOffset)
	req := abi.UCMGetEvent{Response: addr(kresp)}
	err = f.write(s, "rdma_cm GET_EVENT", abi.RDMA_USER_CM_CMD_GET_EVENT, abi.Bytes(&req), int(unsafe.Sizeof(*kresp)))
	if errors.Is(err, unix.EAGAIN) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	*resp = *kresp
	return true, nil
}
