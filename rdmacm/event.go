package rdmacm

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/internal/sys"
	"github.com/purerdma/rdma/internal/ucma"
	"github.com/purerdma/rdma/uverbs"
)

// EventType is the kind of an event (enum rdma_cm_event_type).
type EventType uint32

// Event types, with the kernel's numbers.
const (
	EventAddrResolved    EventType = 0  // ResolveAddr finished: the ID is bound to a device
	EventAddrError       EventType = 1  // ResolveAddr failed; Status is -errno
	EventRouteResolved   EventType = 2  // ResolveRoute finished
	EventRouteError      EventType = 3  // ResolveRoute failed; Status is -errno
	EventConnectRequest  EventType = 4  // a listener got a request: Event.ID is the new connection
	EventConnectResponse EventType = 5  // the peer accepted an ID that has no QP from CreateQP: call Establish
	EventConnectError    EventType = 6  // connecting failed; Status is -errno
	EventUnreachable     EventType = 7  // the peer did not answer (Status -errno), or refused a UD Connect (see Event.Refused)
	EventRejected        EventType = 8  // the peer rejected; Status is the reject reason
	EventEstablished     EventType = 9  // the connection is up
	EventDisconnected    EventType = 10 // the connection is down: after the peer's Disconnect answer with Disconnect or Close
	EventDeviceRemoval   EventType = 11 // the device under the ID is going away: close the ID
	EventMulticastJoin   EventType = 12 // JoinMulticast finished: UD has the group's address
	EventMulticastError  EventType = 13 // a multicast membership failed
	EventAddrChange      EventType = 14 // the network address under the ID changed
	EventTimewaitExit    EventType = 15 // the QP of a closed connection may be reused
)

var eventNames = [...]string{
	"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
	"CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED",
	"DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR", "ADDR_CHANGE",
	"TIMEWAIT_EXIT",
}

// String returns the event's name without the RDMA_CM_EVENT_ prefix, as
// "ESTABLISHED".
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// RejectReason is the reason of an InfiniBand CM reject (enum
// ib_cm_rej_reason), the Status of a REJECTED event.
type RejectReason int

// Reject reasons the rdma_cm reports most often.
const (
	RejectNoQP             RejectReason = 1
	RejectNoResources      RejectReason = 3
	RejectTimeout          RejectReason = 4
	RejectUnsupported      RejectReason = 5
	RejectInvalidServiceID RejectReason = 8 // no listener on the port
	RejectStaleConn        RejectReason = 10
	RejectConsumerDefined  RejectReason = 28 // the peer called Reject
	RejectVendorOption     RejectReason = 35 // IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED
)

var rejectNames = map[RejectReason]string{
	1: "NO_QP", 2: "NO_EEC", 3: "NO_RESOURCES", 4: "TIMEOUT", 5: "UNSUPPORTED",
	6: "INVALID_COMM_ID", 7: "INVALID_COMM_INSTANCE", 8: "INVALID_SERVICE_ID",
	9: "INVALID_TRANSPORT_TYPE", 10: "STALE_CONN", 11: "RDC_NOT_EXIST", 12: "INVALID_GID",
	13: "INVALID_LID", 14: "INVALID_SL", 15: "INVALID_TRAFFIC_CLASS", 16: "INVALID_HOP_LIMIT",
	17: "INVALID_PACKET_RATE", 18: "INVALID_ALT_GID", 19: "INVALID_ALT_LID", 20: "INVALID_ALT_SL",
	21: "INVALID_ALT_TRAFFIC_CLASS", 22: "INVALID_ALT_HOP_LIMIT", 23: "INVALID_ALT_PACKET_RATE",
	24: "PORT_CM_REDIRECT", 25: "PORT_REDIRECT", 26: "INVALID_MTU", 27: "INSUFFICIENT_RESP_RESOURCES",
	28: "CONSUMER_DEFINED", 29: "INVALID_RNR_RETRY", 30: "DUPLICATE_LOCAL_COMM_ID",
	31: "INVALID_CLASS_VERSION", 32: "INVALID_FLOW_LABEL", 33: "INVALID_ALT_FLOW_LABEL",
	35: "VENDOR_OPTION_NOT_SUPPORTED",
}

// String returns the IB CM name of the reason, as "CONSUMER_DEFINED".
func (r RejectReason) String() string {
	if s, ok := rejectNames[r]; ok {
		return s
	}
	if r < 0 { // iWARP: a negative errno
		return "iWARP " + sys.ErrnoText(-int(r))
	}
	return "RejectReason(" + strconv.Itoa(int(r)) + ")"
}

// ConnInfo are the connection parameters an event of an RC ID reports
// (the peer's, for CONNECT_REQUEST and CONNECT_RESPONSE).
type ConnInfo struct {
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        bool
	RetryCount         uint8
	RNRRetryCount      uint8
	SRQ                bool
	QPNum              uint32
}

// UDParam is where a UD peer or a multicast group receives datagrams:
// the destination of a UD send (rdma_ud_param).
type UDParam struct {
	QPNum  uint32 // the remote QP, 0xffffff for a multicast group
	QKey   uint32
	AHAttr uverbs.AHAttr
}

// MulticastQPN is the QP number of a multicast group.
const MulticastQPN = 0xffffff

// CreateAH creates an address handle for sending to the peer or group
// (ibv_create_ah with the event's ah_attr).
func (u *UDParam) CreateAH(pd *uverbs.PD) (*uverbs.AH, error) {
	return pd.CreateAH(u.AHAttr)
}

// Event is one rdma_cm event, copied out of the kernel and already
// acknowledged: it stays valid after later calls to Next and needs no
// rdma_ack_cm_event.
type Event struct {
	Type EventType
	// Status is the kernel's status: 0 on success, a negative errno
	// for ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR and UNREACHABLE, the
	// reject reason (a positive RejectReason) for REJECTED, and the SIDR
	// reply status (positive) for the UNREACHABLE of a refused UD
	// Connect.
	Status int
	// ID is the ID the event is about. For CONNECT_REQUEST it is the
	// new ID of the incoming connection, on which to Accept or Reject.
	ID *ID
	// Listener is, for CONNECT_REQUEST, the listening ID.
	Listener *ID
	// PrivateData is the peer's private data, as long as the kernel
	// reports it: the InfiniBand CM carries fixed-size fields (56 bytes
	// in a connect request, 196 in an accept, 148 in a reject), so short
	// data arrives padded with zeros. nil when the event has none.
	PrivateData []byte
	// Conn is the connection parameters of an RC (PortSpaceTCP) event.
	Conn ConnInfo
	// UD is the peer's (or the group's) address of a UD (PortSpaceUDP)
	// event: ESTABLISHED after Connect, and MULTICAST_JOIN. nil for RC.
	UD *UDParam
	// Group is the multicast address of MULTICAST_JOIN and
	// MULTICAST_ERROR.
	Group netip.Addr
}

// Err returns nil for an event with a zero status, else an *EventError:
// when the peer refused (see Refused) it matches ErrRejected and
// ECONNREFUSED, for the others the errno of the status.
func (e *Event) Err() error {
	if e.Status == 0 {
		return nil
	}
	return &EventError{Want: e.Type, Event: e}
}

// SIDR reply statuses (enum ib_cm_sidr_status): the positive Status of
// an UNREACHABLE event of a PortSpaceUDP ID whose Connect was answered.
const (
	sidrUnsupported = 1 // no listener on the port
	sidrReject      = 2 // the peer called Reject
)

// Refused reports whether the peer refused the connection: a REJECTED
// event, or for PortSpaceUDP an UNREACHABLE event whose Status is the
// SIDR reply status of a reject (2) or of a port without a listener (1).
func (e *Event) Refused() bool {
	return e.Type == EventRejected || (e.Type == EventUnreachable && e.Status > 0)
}

// errno is the status of an event that is not a refusal as an errno, 0
// for none. The kernel reports most errors as -errno, some as +errno.
func (e *Event) errno() int {
	if e.Refused() || e.Status == 0 {
		return 0
	}
	if e.Status < 0 {
		return -e.Status
	}
	return e.Status
}

// RejectReason is the reason of a REJECTED event, 0 for other events.
// On InfiniBand and RoCE it is the CM's reject reason; on iWARP, whose
// CM has none, it is a negative errno: -ECONNRESET when the peer called
// Reject, -ECONNREFUSED when nothing listens on the port.
func (e *Event) RejectReason() RejectReason {
	if e.Type != EventRejected {
		return 0
	}
	return RejectReason(e.Status)
}

// String describes the event for logs.
func (e *Event) String() string {
	s := e.Type.String()
	if e.ID != nil {
		s += " id " + strconv.Itoa(int(e.ID.handle))
	}
	switch {
	case e.Type == EventRejected:
		s += " reason " + e.RejectReason().String()
	case e.Status < 0:
		s += " status " + ucma.Errno(-e.Status).Error()
	case e.Status > 0:
		s += " status " + strconv.Itoa(e.Status)
	}
	if len(e.PrivateData) > 0 {
		s += fmt.Sprintf(" private data %d bytes", len(e.PrivateData))
	}
	return s
}

// decodeEvent copies what an event response holds into ev. ud selects
// the union member: the kernel writes ud for IDs of UD QPs.
func decodeEvent(r *abi.UCMEventResp, ud bool, ev *Event) {
	ev.Type = EventType(r.Event)
	ev.Status = int(int32(r.Status))
	if ud {
		p := r.Param.UD()
		n := min(int(p.PrivateDataLen), len(p.PrivateData))
		if n > 0 {
			ev.PrivateData = append([]byte(nil), p.PrivateData[:n]...)
		}
		ev.UD = &UDParam{QPNum: p.QPNum, QKey: p.QKey, AHAttr: ahAttr(&p.AHAttr)}
		return
	}
	p := r.Param.Conn()
	n := min(int(p.PrivateDataLen), len(p.PrivateData))
	if n > 0 {
		ev.PrivateData = append([]byte(nil), p.PrivateData[:n]...)
	}
	ev.Conn = ConnInfo{ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		FlowControl: p.FlowControl != 0, RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount,
		SRQ: p.SRQ != 0, QPNum: p.QPNum}
}

func ahAttr(a *abi.AHAttr) uverbs.AHAttr {
	return uverbs.AHAttr{
		GRH: uverbs.GlobalRoute{DGID: uverbs.GID(a.GRH.DGID), FlowLabel: a.GRH.FlowLabel,
			SGIDIndex: int(a.GRH.SGIDIndex), HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass},
		DLID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate,
		IsGlobal: a.IsGlobal != 0, PortNum: int(a.PortNum),
	}
}
