package abi

import "unsafe"

// Offsets of members inside structs the rxe provider writes into mapped
// queues, where the flexible arrays that follow them start.
const (
	OffsetofRXESendWQEDMA = unsafe.Offsetof(RXESendWQE{}.DMA)
	OffsetofRXERecvWQEDMA = unsafe.Offsetof(RXERecvWQE{}.DMA)
	SizeofRXESGE          = unsafe.Sizeof(RXESGE{})
	SizeofWC              = unsafe.Sizeof(WC{})
	SizeofSendWR          = unsafe.Sizeof(SendWR{})
)
