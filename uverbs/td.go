package uverbs

// TD is a thread domain (ibv_alloc_td(3)). Queues created with one — CQs,
// QPs and SRQs whose config names it — are promised to be used by one
// goroutine at a time, so their post and poll paths take no lock. By
// default every object is safe for concurrent use, with or without a TD.
//
// A TD is a purerdma object, not a kernel one: it works with every
// provider (rxe has no ibv_alloc_td).
type TD struct {
	resource
}

// AllocTD allocates a thread domain.
func (c *Context) AllocTD() (*TD, error) {
	if c == nil {
		return nil, errNil("AllocTD", "Context")
	}
	if c.closed.Load() {
		return nil, closedContext("uverbs AllocTD")
	}
	td := &TD{resource{ctx: c, kind: "TD"}}
	td.closer = func() error { return nil }
	c.track(&td.resource)
	return td, nil
}

// Close releases the TD; it fails with EBUSY while objects use it.
func (td *TD) Close() error {
	if td == nil {
		return errNil("TD.Close", "TD")
	}
	return td.closeAs("TD")
}

// lockFor reports whether an object created with td must lock.
func lockFor(td *TD) bool { return td == nil }
