package uverbs

// rxeProvider is the soft-RoCE provider. (Being written.)
type rxeProvider struct {
	ctx *Context
}

func (p *rxeProvider) name() string                          { return "rxe" }
func (p *rxeProvider) contextDriverData() ([]byte, int)      { return nil, 0 }
func (p *rxeProvider) contextCreated([]byte)                 {}
func (p *rxeProvider) cqDriverData() ([]byte, int)           { return nil, 16 }
func (p *rxeProvider) newCQ(*CQ, []byte) (cqQueue, error)    { return nil, ErrNotSupported }
func (p *rxeProvider) qpDriverData() ([]byte, int)           { return nil, 32 }
func (p *rxeProvider) newQP(*QP, []byte) (qpQueues, error)   { return nil, ErrNotSupported }
func (p *rxeProvider) srqDriverData() ([]byte, int)          { return nil, 24 }
func (p *rxeProvider) newSRQ(*SRQ, []byte) (srqQueue, error) { return nil, ErrNotSupported }
func (p *rxeProvider) ahDriverOutLen() int                   { return 8 }
func (p *rxeProvider) ahCreated(ah *AH, out []byte)          {}
func (p *rxeProvider) close()                                {}
