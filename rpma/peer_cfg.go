package rpma

import "sync/atomic"

// PeerCfg is what a peer tells the other side about itself (struct
// rpma_peer_cfg): whether writes reach its persistent memory directly
// (so a flush to persistency is meaningful), and, between purerdma
// peers, whether its memory regions take native RDMA FLUSH and whether
// its device executes native ATOMIC_WRITE.
//
// A PeerCfg is safe for concurrent use.
type PeerCfg struct {
	direct   atomic.Bool
	native   atomic.Bool
	atomicWr atomic.Bool
}

// NewPeerCfg returns a configuration with direct write to PMem off
// (rpma_peer_cfg_new).
func NewPeerCfg() *PeerCfg { return &PeerCfg{} }

// SetDirectWriteToPMem says whether RDMA writes to this peer reach
// persistent memory directly (rpma_peer_cfg_set_direct_write_to_pmem):
// the platform must be set up for it (for example DDIO off). Only then
// may the other side flush with FlushPersistent.
func (c *PeerCfg) SetDirectWriteToPMem(supported bool) { c.direct.Store(supported) }

// DirectWriteToPMem reports the setting
// (rpma_peer_cfg_get_direct_write_to_pmem).
func (c *PeerCfg) DirectWriteToPMem() bool { return c.direct.Load() }

// SetNativeFlush says whether the regions this peer sends to the other
// side take native RDMA FLUSH for their flush usages: set it from
// MR.NativeFlush of the region the configuration travels with. A
// purerdma client whose ConnCfg leaves the flush method at FlushAuto
// flushes natively only when the remote peer's applied configuration
// says so; a wrong true makes the client's flushes fail with a remote
// access error, which breaks the connection.
func (c *PeerCfg) SetNativeFlush(on bool) { c.native.Store(on) }

// NativeFlush reports the setting.
func (c *PeerCfg) NativeFlush() bool { return c.native.Load() }

// SetNativeAtomicWrite says whether this peer's device executes native
// RDMA ATOMIC_WRITE as a responder: set it from Peer.NativeAtomicWrite.
// A purerdma client posts native atomic writes only when its own device
// has them and the remote peer's applied configuration says so;
// otherwise it writes the 8 bytes with a fenced inline RDMA WRITE, as
// librpma's emulation does. (A responder whose kernel does not know the
// opcode, such as rxe before Linux 6.8, answers it with an error that
// breaks the connection.)
func (c *PeerCfg) SetNativeAtomicWrite(on bool) { c.atomicWr.Store(on) }

// NativeAtomicWrite reports the setting.
func (c *PeerCfg) NativeAtomicWrite() bool { return c.atomicWr.Load() }

// Peer configuration descriptor layout. C librpma's is one byte, the
// direct-write flag (0 or 1), and its decoder reads only that byte of
// a longer descriptor. A purerdma peer that takes native FLUSH or
// native ATOMIC_WRITE adds a second byte of flags; without either the
// descriptor is C's single byte.
const (
	PeerCfgDescriptorSize    = 1 // librpma's size (rpma_peer_cfg_get_descriptor_size)
	peerCfgDescriptorMaxSize = 2
	peerCfgFlagNativeFlush   = 1 << 0
	peerCfgFlagAtomicWrite   = 1 << 1
)

// Descriptor encodes the configuration for the other side
// (rpma_peer_cfg_get_descriptor; its length is
// rpma_peer_cfg_get_descriptor_size): one byte, or two with native
// flush or native atomic write on.
func (c *PeerCfg) Descriptor() []byte {
	return c.AppendDescriptor(make([]byte, 0, peerCfgDescriptorMaxSize))
}

// AppendDescriptor appends the descriptor to b.
func (c *PeerCfg) AppendDescriptor(b []byte) []byte {
	var d byte
	if c.direct.Load() {
		d = 1
	}
	b = append(b, d)
	var f byte
	if c.native.Load() {
		f |= peerCfgFlagNativeFlush
	}
	if c.atomicWr.Load() {
		f |= peerCfgFlagAtomicWrite
	}
	if f != 0 {
		b = append(b, f)
	}
	return b
}

// PeerCfgFromDescriptor decodes a descriptor the other side sent
// (rpma_peer_cfg_from_descriptor). It needs at least one byte; bytes
// after the ones it knows are ignored, as C librpma ignores them.
func PeerCfgFromDescriptor(desc []byte) (*PeerCfg, error) {
	if len(desc) < PeerCfgDescriptorSize {
		return nil, invalid("peer_cfg from descriptor", "%d-byte descriptor, want at least %d", len(desc), PeerCfgDescriptorSize)
	}
	c := &PeerCfg{}
	c.direct.Store(desc[0] != 0)
	if len(desc) >= 2 {
		c.native.Store(desc[1]&peerCfgFlagNativeFlush != 0)
		c.atomicWr.Store(desc[1]&peerCfgFlagAtomicWrite != 0)
	}
	logf(LogInfo, "Direct Write To PMem is %s", supportedStr(c.direct.Load()))
	return c, nil
}

func supportedStr(b bool) string {
	if b {
		return "supported"
	}
	return "unsupported"
}
