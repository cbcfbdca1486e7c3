package rpma

import "github.com/purerdma/rdma/uverbs"

// SetRegMR replaces the peer's registration function, for the
// on-demand-paging retry test; odp overrides the device's answer.
func (p *Peer) SetRegMR(f func([]byte, uverbs.Access) (*uverbs.MR, error), odp bool) {
	p.regMR, p.odp = f, odp
}

// NewTestPeer is a peer with no device, for tests of the registration
// logic only.
func NewTestPeer(flush bool) *Peer { return &Peer{flush: flush} }

// Access is the peer's usage-to-access rule; SetIWARP makes the test
// peer's device iWARP.
func (p *Peer) Access(u Usage) uverbs.Access { return p.access(u) }
func (p *Peer) SetIWARP(v bool)              { p.iwarp = v }
