package rdmacm

import (
	"fmt"
	"net/netip"

	"github.com/purerdma/rdma/internal/abi"
	"github.com/purerdma/rdma/uverbs"
)

// membership is one multicast group an ID joined.
type membership struct {
	id       *ID
	uid      uint64
	handle   uint32 // the kernel's id for the membership
	group    netip.Addr
	sendOnly bool

	// Guarded by id.mu.
	mgid     uverbs.GID
	mlid     uint16
	known    bool // MULTICAST_JOIN arrived
	attached bool

	events eventCount
}

func (m *membership) done()               { m.events.done() }
func (m *membership) waitEvents(n uint32) { m.events.wait(n) }

// joined records the group's address from MULTICAST_JOIN and attaches
// the ID's QP (rdma_join_multicast's ucma_process_join).
func (m *membership) joined(ud *UDParam) error {
	m.id.mu.Lock()
	m.mgid, m.mlid, m.known = ud.AHAttr.GRH.DGID, ud.AHAttr.DLID, true
	m.id.mu.Unlock()
	return m.attach()
}

// attach attaches the ID's QP to the group once both exist, unless the
// membership is send-only.
func (m *membership) attach() error {
	m.id.mu.Lock()
	qp := m.id.qp
	if qp == nil || !m.known || m.attached || m.sendOnly {
		m.id.mu.Unlock()
		return nil
	}
	m.attached = true
	gid, lid := m.mgid, m.mlid
	m.id.mu.Unlock()
	if err := qp.AttachMcast(gid, lid); err != nil {
		m.id.mu.Lock()
		m.attached = false
		m.id.mu.Unlock()
		return err
	}
	return nil
}

// detach detaches the ID's QP from the group if attach attached it.
func (m *membership) detach() error {
	m.id.mu.Lock()
	qp := m.id.qp
	if qp == nil || !m.attached {
		m.id.mu.Unlock()
		return nil
	}
	m.attached = false
	gid, lid := m.mgid, m.mlid
	m.id.mu.Unlock()
	return qp.DetachMcast(gid, lid)
}

// JoinMulticast joins the multicast group addr (rdma_join_multicast):
// an IPv4 or IPv6 multicast address. The ID must be bound to a device,
// on RoCE to a device's address. MULTICAST_JOIN follows on the channel
// with the group's UDParam (QP number MulticastQPN, the QKey, the
// address to create an AH from); then the ID's QP, if any and unless
// sendOnly, is attached to the group so that it receives the group's
// datagrams. A send-only member can send to the group without receiving
// (RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER).
func (id *ID) JoinMulticast(group netip.Addr, sendOnly bool) error {
	const op = "JoinMulticast"
	if err := id.alive(op); err != nil {
		return err
	}
	if id.ps != PortSpaceUDP {
		return opError(op, id.handle, fmt.Errorf("multicast needs PortSpaceUDP, not %v: %w", id.ps, errInvalid))
	}
	group = group.WithZone("")
	if !group.IsMulticast() {
		return opError(op, id.handle, fmt.Errorf("%v is not a multicast address: %w", group, errInvalid))
	}
	sa, err := encodeSockaddr(netip.AddrPortFrom(group, 0))
	if err != nil {
		return opError(op, id.handle, err)
	}
	group = group.Unmap()
	m := &membership{id: id, uid: newUID(), group: group, sendOnly: sendOnly}
	id.mu.Lock()
	if _, dup := id.mcasts[group]; dup {
		id.mu.Unlock()
		return opError(op, id.handle, fmt.Errorf("already a member of %v: %w", group, errInvalid))
	}
	if id.mcasts == nil {
		id.mcasts = map[netip.Addr]*membership{}
	}
	id.mcasts[group] = m
	id.mu.Unlock()
	mcByUID.Store(m.uid, m)
	flags := uint16(abi.RDMA_MC_JOIN_FLAG_FULLMEMBER)
	if sendOnly {
		flags = abi.RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
	}
	h, err := id.file().JoinMcast(id.handle, m.uid, sa, flags)
	if err != nil {
		mcByUID.Delete(m.uid)
		id.mu.Lock()
		delete(id.mcasts, group)
		id.mu.Unlock()
		return opError(op, id.handle, err)
	}
	id.mu.Lock()
	m.handle = h
	id.mu.Unlock()
	return nil
}

// LeaveMulticast leaves a group JoinMulticast joined
// (rdma_leave_multicast), detaching the ID's QP first. The group's
// pending events are dropped; one another goroutine's Next already took
// is finished with before LeaveMulticast returns.
func (id *ID) LeaveMulticast(group netip.Addr) error {
	const op = "LeaveMulticast"
	if err := id.alive(op); err != nil {
		return err
	}
	group = group.WithZone("").Unmap()
	id.mu.Lock()
	m := id.mcasts[group]
	delete(id.mcasts, group)
	id.mu.Unlock()
	if m == nil {
		return opError(op, id.handle, fmt.Errorf("not a member of %v: %w", group, errInvalid))
	}
	derr := m.detach()
	reported, err := id.file().LeaveMcast(m.handle)
	if err == nil {
		m.waitEvents(reported)
	}
	mcByUID.Delete(m.uid)
	if err != nil {
		return opError(op, id.handle, err)
	}
	return opError(op, id.handle, derr)
}
