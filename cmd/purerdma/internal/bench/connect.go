package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/rdmacm"
	"github.com/purerdma/rdma/uverbs"
)

// bench connect measures connection set-up and tear-down the way
// librdmacm's cmtime does (rdma-core 44): each step is issued for every
// connection before the next step starts, and the table gives each
// step's total time for the batch, the slowest and fastest connection,
// and the total divided by the number of connections.

// connectSteps are cmtime's steps, in its order and spelling.
var connectSteps = []string{"create id", "bind addr", "resolve addr", "resolve route", "create qp", "connect", "disconnect", "destroy"}

// ConnectSteps returns the steps "bench connect" reports, in order:
// cmtime's, in its spelling.
func ConnectSteps() []string { return slices.Clone(connectSteps) }

const (
	stepCreateID = iota
	stepBind
	stepResolveAddr
	stepResolveRoute
	stepCreateQP
	stepConnect
	stepDisconnect
	stepDestroy
)

type connectOpts struct {
	server, bind string
	port         int
	conns        int
	timeout      time.Duration
	json         bool
	cpuProfile   string
	allocProfile string
	perConnCQs   bool
	accepters    int
}

func parseConnectFlags(args []string) (connectOpts, error) {
	var o connectOpts
	fs := flag.NewFlagSet("bench connect", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error returned says what is wrong; -h prints bench's help
	fs.StringVar(&o.server, "s", "", "server address (client mode)")
	fs.StringVar(&o.bind, "b", "", "bind address (server: listen address; client: source address)")
	fs.IntVar(&o.port, "p", 7471, "rdma_cm port")
	fs.IntVar(&o.conns, "c", 100, "connections")
	fs.DurationVar(&o.timeout, "t", 2*time.Second, "address and route resolution timeout")
	fs.BoolVar(&o.json, "json", false, "print one JSON object")
	fs.BoolVar(&o.perConnCQs, "percq", false, "give every connection its own CQs and completion channels (cmtime shares one pair)")
	fs.IntVar(&o.accepters, "accepters", 1, "server: goroutines that create QPs and accept, each taking the next request (cmtime has one thread); 0 handles every event in the event loop")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile (runtime/pprof) to this file")
	fs.StringVar(&o.allocProfile, "allocprofile", "", "record every allocation and write the profile to this file at the end (slows the run)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return o, cli.ErrHelp
	} else if err != nil {
		return o, cli.UsageError("bench connect: %v", err)
	}
	if fs.NArg() != 0 {
		return o, cli.UsageError("bench connect: unexpected argument %q", fs.Arg(0))
	}
	if o.server == "" && o.bind == "" {
		return o, cli.UsageError("bench connect: -b ADDR (server) or -s SERVER (client)")
	}
	if o.conns < 1 || o.port < 1 || o.port > 65535 || o.timeout <= 0 || o.accepters < 0 {
		return o, cli.UsageError("bench connect: -c, -p and -t must be positive, -accepters not negative (-p at most 65535)")
	}
	return o, nil
}

func runBenchConnect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseConnectFlags(args)
	if err != nil {
		return err
	}
	stop, err := startProfiles(o.cpuProfile, o.allocProfile)
	if err != nil {
		return err
	}
	if o.server == "" {
		return errors.Join(connectServer(ctx, o, stdout), stop())
	}
	res, err := connectClient(ctx, o)
	if err := errors.Join(err, stop()); err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(stdout).Encode(res)
	}
	res.print(stdout, o.bind != "")
	return nil
}

// stepTimes is one step: the batch's start and end, and each
// connection's own.
type stepTimes struct {
	start, end time.Time
	per        []time.Duration
}

// ConnectResult is what bench connect measured, per step.
type ConnectResult struct {
	Connections int           `json:"connections"`
	Steps       []ConnectStep `json:"steps"`
}

// ConnectStep is one row of the table.
type ConnectStep struct {
	Step      string  `json:"step"`
	TotalMS   float64 `json:"total_ms"`
	MaxMS     float64 `json:"max_ms"`
	MinUS     float64 `json:"min_us"`
	USPerConn float64 `json:"us_per_conn"`
}

func (r *ConnectResult) print(w io.Writer, bound bool) {
	fmt.Fprintf(w, "step              total ms     max ms     min us  us / conn\n")
	for _, s := range r.Steps {
		if s.Step == "bind addr" && !bound {
			continue
		}
		fmt.Fprintf(w, "%-13s: %11.2f%11.2f%11.2f%11.2f\n", s.Step, s.TotalMS, s.MaxMS, s.MinUS, s.USPerConn)
	}
}

func summarize(steps []stepTimes, n int) *ConnectResult {
	r := &ConnectResult{Connections: n}
	for i, st := range steps {
		row := ConnectStep{Step: connectSteps[i]}
		total := st.end.Sub(st.start)
		row.TotalMS = float64(total.Microseconds()) / 1000
		row.USPerConn = float64(total.Microseconds()) / float64(n)
		minUS := -1.0
		for _, d := range st.per {
			us := float64(d.Microseconds())
			row.MaxMS = max(row.MaxMS, us/1000)
			if minUS < 0 || us < minUS {
				minUS = us
			}
		}
		row.MinUS = max(minUS, 0)
		r.Steps = append(r.Steps, row)
	}
	return r
}

// connectQP is the QP cmtime creates for each connection.
var connectQP = uverbs.QPConfig{Type: uverbs.QPTypeRC, Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}

// connectCQs gives connections the CQs cmtime's do. cmtime passes one
// static ibv_qp_init_attr to every rdma_create_qp, and librdmacm writes
// the CQs it creates for the first QP back into it, so every later QP
// of the run shares the first one's send and receive CQ: per
// connection, cmtime creates no CQ and no completion channel. To time
// the same work, bench connect creates one pair per device on the
// shared Context and gives it to every QP; -percq makes rdmacm create
// a pair (with channels) per connection instead.
type connectCQs struct {
	perConn bool
	mu      sync.Mutex // accepters share the pairs
	cqs     map[string][2]*uverbs.CQ
}

// config is the QP configuration for a connection on id.
func (c *connectCQs) config(id *rdmacm.ID) (uverbs.QPConfig, error) {
	cfg := connectQP
	if c.perConn {
		return cfg, nil
	}
	dev, ok := id.Device()
	if !ok {
		return cfg, fmt.Errorf("the ID is bound to no device")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pair, ok := c.cqs[dev.Name]
	if !ok {
		ctx, err := id.Context()
		if err != nil {
			return cfg, err
		}
		for i := range pair {
			if pair[i], err = ctx.CreateCQ(uverbs.CQConfig{Size: 1}); err != nil {
				return cfg, err
			}
		}
		if c.cqs == nil {
			c.cqs = map[string][2]*uverbs.CQ{}
		}
		c.cqs[dev.Name] = pair
	}
	cfg.SendCQ, cfg.RecvCQ = pair[0], pair[1]
	return cfg, nil
}

// close closes the CQs once no QP uses them.
func (c *connectCQs) close() {
	for _, pair := range c.cqs {
		for _, cq := range pair {
			if cq != nil {
				cq.Close()
			}
		}
	}
}

func connectClient(ctx context.Context, o connectOpts) (*ConnectResult, error) {
	if err := devs.CheckCM(); err != nil {
		return nil, fmt.Errorf("bench connect: %w", err)
	}
	dst, err := resolveHostPort(ctx, o.server, o.port)
	if err != nil {
		return nil, err
	}
	var src netip.AddrPort
	if o.bind != "" {
		if src, err = resolveHostPort(ctx, o.bind, 0); err != nil {
			return nil, err
		}
	}
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		return nil, err
	}
	defer ch.Close()
	// librdmacm opens every device when the first event channel is
	// created, before cmtime starts timing; one untimed ID does the same
	// here (device lookup, the shared device context) and keeps it open
	// for the run, so no step pays a once-per-process cost.
	warm, err := rdmacm.CreateID(nil, rdmacm.PortSpaceTCP)
	if err != nil {
		return nil, err
	}
	defer warm.Close()
	if err := warm.ResolveAddrContext(ctx, src, dst); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if _, err := warm.Context(); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	cqs := &connectCQs{perConn: o.perConnCQs}
	defer cqs.close()
	if _, err := cqs.config(warm); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	n := o.conns
	steps := make([]stepTimes, len(connectSteps))
	for i := range steps {
		steps[i].per = make([]time.Duration, n)
	}
	ids := make([]*rdmacm.ID, n)
	index := make(map[*rdmacm.ID]int, n)
	begun := make([]time.Time, n)
	defer func() {
		for _, id := range ids {
			if id != nil {
				id.Close()
			}
		}
	}()
	// each runs fn for every connection, timing the step per connection
	// and for the batch.
	each := func(step int, fn func(i int) error) error {
		steps[step].start = time.Now()
		for i := range n {
			t := time.Now()
			if err := fn(i); err != nil {
				return fmt.Errorf("%s %d: %w", connectSteps[step], i, err)
			}
			steps[step].per[i] = time.Since(t)
		}
		steps[step].end = time.Now()
		return nil
	}
	// await issues an asynchronous step for every connection while the
	// event reader takes the events, as cmtime's event thread does, and
	// waits until each connection has had its event.
	var events *stepEvents
	await := func(step int, issue func(i int) error, want rdmacm.EventType) error {
		events.expect(want, n)
		steps[step].start = time.Now()
		for i := range n {
			begun[i] = time.Now()
			if err := issue(i); err != nil {
				return fmt.Errorf("%s %d: %w", connectSteps[step], i, err)
			}
		}
		// The reader stops without a report when ctx ends.
		select {
		case err := <-events.done:
			if err != nil {
				return fmt.Errorf("%s: %w", connectSteps[step], err)
			}
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", connectSteps[step], ctx.Err())
		}
		steps[step].end = time.Now()
		for i := range n {
			steps[step].per[i] = events.arrived[i].Sub(begun[i])
		}
		return nil
	}
	if err := each(stepCreateID, func(i int) error {
		id, err := rdmacm.CreateID(ch, rdmacm.PortSpaceTCP)
		ids[i] = id
		index[id] = i
		return err
	}); err != nil {
		return nil, err
	}
	events = &stepEvents{index: index, arrived: make([]time.Time, n), done: make(chan error, 1)}
	readCtx, stopReading := context.WithCancel(ctx)
	var reader sync.WaitGroup
	reader.Go(func() { events.read(readCtx, ch) })
	defer reader.Wait()
	defer stopReading()
	if src.IsValid() {
		if err := each(stepBind, func(i int) error { return ids[i].Bind(src) }); err != nil {
			return nil, err
		}
	}
	if err := await(stepResolveAddr, func(i int) error { return ids[i].ResolveAddr(src, dst, o.timeout) }, rdmacm.EventAddrResolved); err != nil {
		return nil, err
	}
	if err := await(stepResolveRoute, func(i int) error { return ids[i].ResolveRoute(o.timeout) }, rdmacm.EventRouteResolved); err != nil {
		return nil, err
	}
	if err := each(stepCreateQP, func(i int) error {
		cfg, err := cqs.config(ids[i])
		if err == nil {
			_, err = ids[i].CreateQP(nil, cfg)
		}
		return err
	}); err != nil {
		return nil, err
	}
	if err := await(stepConnect, func(i int) error { return ids[i].Connect(nil) }, rdmacm.EventEstablished); err != nil {
		return nil, err
	}
	if err := await(stepDisconnect, func(i int) error { return ids[i].Disconnect() }, rdmacm.EventDisconnected); err != nil {
		return nil, err
	}
	err = each(stepDestroy, func(i int) error {
		err := ids[i].Close()
		ids[i] = nil
		return err
	})
	if err != nil {
		return nil, err
	}
	return summarize(steps, n), nil
}

// stepEvents takes a client's events in a goroutine of their own, as
// cmtime's event thread does, so events are handled while the step is
// still being issued. Each step expects one event of one type from each
// connection.
type stepEvents struct {
	index     map[*rdmacm.ID]int // read only once reading starts
	want      atomic.Uint32      // the EventType the step expects
	remaining atomic.Int64       // connections still to have their event
	arrived   []time.Time        // when each connection's event came; read after done
	done      chan error         // one value per step, or the error that ended reading
}

// expect starts a step: n events of type want.
func (e *stepEvents) expect(want rdmacm.EventType, n int) {
	e.want.Store(uint32(want))
	e.remaining.Store(int64(n))
}

// read takes events until ctx ends or an event is not the one expected.
func (e *stepEvents) read(ctx context.Context, ch *rdmacm.EventChannel) {
	report := func(err error) {
		select {
		case e.done <- err:
		case <-ctx.Done():
		}
	}
	for {
		ev, err := ch.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				report(err)
			}
			return
		}
		i, ok := e.index[ev.ID]
		if !ok || ev.Type == rdmacm.EventTimewaitExit {
			continue // TIMEWAIT_EXIT follows a connection's DISCONNECTED
		}
		if want := rdmacm.EventType(e.want.Load()); ev.Type != want {
			if err := ev.Err(); err != nil {
				report(fmt.Errorf("connection %d: %v: %w", i, ev, err))
			} else {
				report(fmt.Errorf("connection %d: unexpected %v", i, ev.Type))
			}
			return
		}
		e.arrived[i] = time.Now()
		if e.remaining.Add(-1) == 0 {
			report(nil)
		}
	}
}

// connectServer accepts connections until ctx ends, answering each
// disconnect by destroying the connection, as cmtime's server does. With
// o.accepters 1 it also has cmtime's structure: the event loop hands
// connect requests to one goroutine (CreateQP, Accept) and disconnects
// to another (Disconnect, Close), so the three overlap as cmtime's three
// threads do; more accepters share the requests, and 0 handles every
// event in the loop.
func connectServer(ctx context.Context, o connectOpts, stdout io.Writer) error {
	if err := devs.CheckCM(); err != nil {
		return fmt.Errorf("bench connect: %w", err)
	}
	addr, err := resolveHostPort(ctx, o.bind, o.port)
	if err != nil {
		return err
	}
	ch, err := rdmacm.NewEventChannel()
	if err != nil {
		return err
	}
	defer ch.Close()
	l, err := rdmacm.CreateID(ch, rdmacm.PortSpaceTCP)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := l.Bind(addr); err != nil {
		return fmt.Errorf("bench connect: bind to %v: %w", addr, devs.BindError(addr, err))
	}
	if err := l.Listen(0); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on %v\n", addr)
	cqs := &connectCQs{perConn: o.perConnCQs}
	defer cqs.close()
	var mu sync.Mutex
	open := map[*rdmacm.ID]bool{}
	defer func() { // before the CQs: their QPs use them
		for id := range open {
			id.Close()
		}
	}()
	closeID := func(id *rdmacm.ID) {
		mu.Lock()
		mine := open[id]
		delete(open, id)
		mu.Unlock()
		if mine {
			id.Close()
		}
	}
	acceptNow := func(id *rdmacm.ID) {
		cfg, err := cqs.config(id)
		if err == nil {
			_, err = id.CreateQP(nil, cfg)
		}
		if err == nil {
			err = id.Accept(nil)
		}
		if err != nil {
			mu.Lock() // stdout is shared by the accepters
			fmt.Fprintf(stdout, "connect request: %v\n", err)
			mu.Unlock()
			id.Reject(nil)
			closeID(id)
		}
	}
	disconnectNow := func(id *rdmacm.ID) {
		id.Disconnect()
		closeID(id)
	}
	accept, disconnect := acceptNow, disconnectNow
	// With accepters, requests and disconnects go to goroutines of their
	// own, as cmtime hands them to its threads; without, the event loop
	// handles each event itself.
	if o.accepters > 0 {
		requests := make(chan *rdmacm.ID, 1024)
		disconnects := make(chan *rdmacm.ID, 1024)
		var workers sync.WaitGroup
		for range o.accepters {
			workers.Go(func() {
				for id := range requests {
					acceptNow(id)
				}
			})
		}
		workers.Go(func() {
			for id := range disconnects {
				disconnectNow(id)
			}
		})
		defer workers.Wait()
		defer close(disconnects)
		defer close(requests)
		accept = func(id *rdmacm.ID) { requests <- id }
		disconnect = func(id *rdmacm.ID) { disconnects <- id }
	}
	for {
		ev, err := ch.Next(ctx)
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil
		}
		if err != nil {
			return err
		}
		switch ev.Type {
		case rdmacm.EventConnectRequest:
			mu.Lock()
			open[ev.ID] = true
			mu.Unlock()
			accept(ev.ID)
		case rdmacm.EventDisconnected:
			disconnect(ev.ID)
		case rdmacm.EventConnectError, rdmacm.EventUnreachable, rdmacm.EventRejected:
			closeID(ev.ID)
		}
	}
}

// resolveHostPort turns a numeric address or a host name into an
// address with port.
func resolveHostPort(ctx context.Context, host string, port int) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(a, uint16(port)), nil
	}
	ais, err := rdmacm.GetAddrInfo(ctx, host, fmt.Sprint(port), nil)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if len(ais) == 0 {
		return netip.AddrPort{}, fmt.Errorf("%s: no address", host)
	}
	return ais[0].Dst, nil
}
