package uverbs

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/purerdma/rdma/internal/sys"
)

// resource is the life-cycle part shared by every kernel object: a
// handle, a closed flag, a count of the objects that depend on it, and its
// place in the context's registry.
type resource struct {
	ctx    *Context
	kind   string // "PD", "CQ", ... for errors
	handle uint32
	closed atomic.Bool
	users  atomic.Int32 // dependents that must close first
	seq    uint64       // creation order, for Context.Close
	closer func() error // destroys the kernel object
}

// use counts a dependent; release undoes it.
func (r *resource) use()     { r.users.Add(1) }
func (r *resource) release() { r.users.Add(-1) }

// errNotMade is the error for an object that no constructor of this
// package made (a zero value): it has no kernel object behind it.
var errNotMade = fmt.Errorf("an object not made by this package (a zero value): %w", errInvalid)

// notMade names op in errNotMade.
func notMade(op string) error { return fmt.Errorf("uverbs %s: %w", op, errNotMade) }

// alive reports ErrClosed for a closed object or context; op names the
// call ("CreateQP", "QP.Modify").
func (r *resource) alive(op string) error {
	if r.ctx == nil {
		return notMade(op)
	}
	if r.closed.Load() {
		return fmt.Errorf("uverbs %s: %s: %w", op, r.kind, ErrClosed)
	}
	if r.ctx.closed.Load() {
		return fmt.Errorf("uverbs %s: %s: context: %w", op, r.kind, ErrClosed)
	}
	return nil
}

// close destroys the object once. An object others still depend on is
// refused with EBUSY before any kernel call, and stays open.
func (r *resource) close() error { return r.closeAs(r.kind) }

// closeAs is close for a Close method of type kind ("QP"), which names
// it in errors even for a zero value (whose r.kind is empty).
func (r *resource) closeAs(kind string) error {
	if r.ctx == nil {
		return notMade(kind + ".Close")
	}
	if r.users.Load() > 0 {
		return sys.InUse("uverbs "+kind+".Close", int(r.users.Load()))
	}
	if !r.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("uverbs %s.Close: %w", kind, ErrClosed)
	}
	err := r.closer()
	r.ctx.untrack(r)
	return err
}

// registry holds a context's live objects so Context.Close can destroy
// them newest first, which puts dependents before what they depend on.
type registry struct {
	mu   sync.Mutex
	next uint64
	live map[*resource]struct{}
}

func (g *registry) add(r *resource) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.live == nil {
		g.live = map[*resource]struct{}{}
	}
	g.next++
	r.seq = g.next
	g.live[r] = struct{}{}
}

func (g *registry) remove(r *resource) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.live, r)
}

func (g *registry) newestFirst() []*resource {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*resource, 0, len(g.live))
	for r := range g.live {
		out = append(out, r)
	}
	for i := 1; i < len(out); i++ { // insertion sort: small sets
		for j := i; j > 0 && out[j].seq > out[j-1].seq; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// usable checks that r can be used with an object of c: it is open and
// belongs to the same context (objects of another device are foreign).
func (r *resource) usable(op string, c *Context) error {
	if r.ctx == nil {
		return notMade(op)
	}
	if r.ctx != c {
		return fmt.Errorf("uverbs %s: %s belongs to device %s, not %s", op, r.kind, r.ctx.dev.Name, c.dev.Name)
	}
	return r.alive(op)
}
