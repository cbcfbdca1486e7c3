package mlx5

import "testing"

// FuzzDecodeCQE feeds arbitrary bytes, as a device (or a corrupt buffer)
// could leave them, to the CQE decoder and the CQ poller: neither may
// panic, and a decoded CQE keeps its fields in range.
func FuzzDecodeCQE(f *testing.F) {
	seed := make([]byte, 64)
	for _, op := range []byte{CQEReq, CQERespSend, CQERespSendImm, CQERespWRImm, CQERespSendInv, CQEReqErr, CQERespErr, CQEInvalid, 7} {
		b := append([]byte(nil), seed...)
		b[63] = op<<4 | 1
		b[56] = OpRDMARead
		b[55] = SyndRemoteAccess
		f.Add(b)
	}
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var c CQE
		if DecodeCQE(b, &c) {
			if len(b) < 64 || c.QPN > 0xffffff || c.SRQNUIdx > 0xffffff || c.Opcode > 15 {
				t.Fatalf("decoded %+v from %d bytes", c, len(b))
			}
			if (c.Opcode == CQEReqErr || c.Opcode == CQERespErr) != (c.Status != WCSuccess) {
				t.Fatalf("status %d for opcode %d", c.Status, c.Opcode)
			}
		}
		// The same bytes as the only CQE of a 2-entry CQ.
		if len(b) >= 128 {
			s := CQSizing{NCQE: 2, CQESize: 64, KernCQE: 1, Bytes: 128}
			q, err := NewCQ(CQConfig{Buf: b[:128], Sizing: s, DBRec: make([]byte, 8), Writer: plainWriter{}})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				q.Poll(&c)
			}
			q.UpdateCI()
		}
	})
}
