// Package rcopy is "purerdma rcopy": rdma-core's rcopy
// (librdmacm/examples/rcopy.c) in Go, over the rsocket package: a file
// copied to a server over one rsocket connection, with rcopy's command
// line, output, messages and exit statuses, and the same bytes on the
// wire, so either end can be the C tool.
//
// The protocol: 16-byte headers {version u8 (0), command u8, len u16,
// data u32, id u64} in the host's byte order (C's "TODO: handle byte
// swapping": both ends must have the same), answered by a header with
// command|0x80 and a status (0, or an errno) in data. OPEN carries the
// file's st_mode in data and the destination path after the header,
// NUL-padded to a multiple of 8; WRITE carries the size (u64) after the
// header, and then the file's bytes follow; CLOSE ends the file. The
// client then shuts the connection down; the server waits for the next.
//
// Differences from rcopy: the server writes the file with write calls
// (C maps it); -n ends the server after that many connections (C serves
// for ever); a failure exits with status 1 and a message on stderr
// (rcopy exits with the errno or -1), a bad command line with 2; the
// server checks each header's length before it reads what follows.
package rcopy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/purerdma/rdma/cmd/purerdma/internal/cli"
	"github.com/purerdma/rdma/cmd/purerdma/internal/devs"
	"github.com/purerdma/rdma/rsocket"
)

// Command is "purerdma rcopy".
var Command = cli.Command{
	Name: "rcopy",
	Usage: "  rcopy [-p PORT] [-n N]                    rcopy's server: receives files over rsocket; either end\n" +
		"  rcopy SRC SERVER[:DST] [-p PORT]          may be rdma-core's rcopy; rcopy -h lists the flags\n",
	Help: rcopyHelp,
	Run:  rcopyCmd,
}

const rcopyHelp = `Usage:
  purerdma rcopy [-p port] [-n count]               server: writes the files clients send
  purerdma rcopy source server[:destination] [-p port]
                                                    client: copies source to the server,
                                                    as destination (default: source's path)

Options (as rdma-core's rcopy):
  -p port_number  port (default 7427)
  -n count        server: end after count connections (default 0: serve until
                  interrupted, as C's server does)

The server listens on every address and writes each file at the path the
client names, with the source's permission bits (less the umask), as rcopy
does: run it only where that is acceptable.

Examples:
  purerdma rcopy -n 1
  purerdma rcopy /etc/services 198.18.0.1:/tmp/services
`

// rcopy's commands and limits.
const (
	rcDefaultPort = 7427
	rcHdrLen      = 16
	rcWriteLen    = rcHdrLen + 8
	rcCmdOpen     = 1
	rcCmdClose    = 2
	rcCmdWrite    = 3
	rcCmdResp     = 0x80
)

// rcHdr is struct msg_hdr.
type rcHdr struct {
	Version uint8
	Command uint8
	Len     uint16
	Data    uint32
	ID      uint64
}

func (h rcHdr) marshal(b []byte) {
	b[0], b[1] = h.Version, h.Command
	binary.NativeEndian.PutUint16(b[2:], h.Len)
	binary.NativeEndian.PutUint32(b[4:], h.Data)
	binary.NativeEndian.PutUint64(b[8:], h.ID)
}

func parseRcHdr(b []byte) rcHdr {
	return rcHdr{Version: b[0], Command: b[1], Len: binary.NativeEndian.Uint16(b[2:]),
		Data: binary.NativeEndian.Uint32(b[4:]), ID: binary.NativeEndian.Uint64(b[8:])}
}

// rcOptions are the command line of one run.
type rcOptions struct {
	port     int
	count    int    // -n: connections the server serves; 0 for ever
	src      string // client: the file to send
	server   string // client: the server's address
	dst      string // client: the path on the server
	isServer bool
}

// parseRcopyArgs parses rcopy's command line: the server's "[-p PORT]
// [-n COUNT]" when there is no argument or the first starts with "-",
// else the client's "SRC SERVER[:DST] [-p PORT]"; the flags as its
// getopt reads them (cli.Getopt).
func parseRcopyArgs(args []string) (rcOptions, error) {
	o := rcOptions{port: rcDefaultPort}
	flags := args
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		o.isServer = true
	} else {
		if len(args) < 2 {
			return o, cli.UsageError("rcopy: the client takes SOURCE SERVER[:DESTINATION]")
		}
		o.src, o.server = args[0], args[1]
		if host, path, ok := strings.Cut(o.server, ":"); ok {
			o.server, o.dst = host, path
		}
		if o.dst == "" {
			o.dst = o.src
		}
		if o.server == "" || o.src == "" {
			return o, cli.UsageError("rcopy: empty source or server")
		}
		flags = args[2:]
	}
	g := cli.Getopt{Cmd: "rcopy", Opts: []cli.Opt{{Short: 'p', HasArg: true}}}
	if o.isServer {
		g.Opts = append(g.Opts, cli.Opt{Short: 'n', HasArg: true})
	}
	_, err := g.Parse(flags, func(opt cli.Opt, val string) error {
		f := opt.Short
		n, err := strconv.Atoi(val)
		switch {
		case err != nil:
			return cli.UsageError("rcopy: -%c %q: not a decimal number", f, val)
		case f == 'p' && (n < 1 || n > 65535):
			return cli.UsageError("rcopy: -p %d: out of range (1 to 65535)", n)
		case f == 'n' && n < 0:
			return cli.UsageError("rcopy: -n %d: not a count", n)
		case f == 'p':
			o.port = n
		default:
			o.count = n
		}
		return nil
	})
	return o, err
}

func rcopyCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseRcopyArgs(args)
	if err != nil {
		return err
	}
	if err := devs.CheckCM(); err != nil {
		return fmt.Errorf("rcopy: %w", err)
	}
	if o.isServer {
		err = rcopyServer(ctx, o, stdout)
	} else {
		err = rcopyClient(ctx, o, stdout)
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("rcopy: interrupted: %w", context.Cause(ctx))
	}
	return err
}

// rcopyServer is rcopy's server_run.
func rcopyServer(ctx context.Context, o rcOptions, stdout io.Writer) (err error) {
	l, err := rsocket.Listen(ctx, "tcp", net.JoinHostPort("", strconv.Itoa(o.port)))
	if err != nil {
		return fmt.Errorf("rcopy: %w", err)
	}
	defer cli.CloseErr(&err, l.Close)
	for n := 0; o.count == 0 || n < o.count; n++ {
		fmt.Fprint(stdout, "waiting for connection...")
		c, err := l.AcceptContext(ctx)
		if err != nil {
			return fmt.Errorf("rcopy: accept: %w", err)
		}
		ip := ""
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			ip = a.IP.String()
		}
		fmt.Fprintf(stdout, "client: %s\n", ip)
		s := &rcServer{c: c, out: stdout}
		stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
		s.process()
		stop()
		s.closeFile()
		c.CloseWrite()
		if err := c.Close(); err != nil && ctx.Err() == nil {
			return fmt.Errorf("rcopy: close: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// rcServer is one connection of the server: server_process.
type rcServer struct {
	c   *rsocket.Conn
	out io.Writer
	f   *os.File
}

func (s *rcServer) closeFile() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// process serves commands until the client goes or one fails.
func (s *rcServer) process() {
	var b [rcHdrLen]byte
	for {
		if _, err := io.ReadFull(s.c, b[:]); err != nil {
			return
		}
		h := parseRcHdr(b[:])
		if h.Version != 0 || h.Len < rcHdrLen {
			fmt.Fprintf(s.out, "invalid version %d or length %d\n", h.Version, h.Len)
			return
		}
		var status uint32
		var ok bool
		switch h.Command {
		case rcCmdOpen:
			status, ok = s.open(h)
		case rcCmdClose:
			fmt.Fprint(s.out, "closing...")
			err := s.respond(h, 0)
			s.closeFile()
			fmt.Fprint(s.out, "done\n")
			if err != nil {
				return
			}
			continue
		case rcCmdWrite:
			status, ok = s.write(h)
		default:
			status, ok = uint32(syscall.EINVAL), false
		}
		if err := s.respond(h, status); err != nil || !ok || status != 0 {
			return
		}
	}
}

func (s *rcServer) respond(h rcHdr, status uint32) error {
	var b [rcHdrLen]byte
	rcHdr{Command: h.Command | rcCmdResp, Len: rcHdrLen, Data: status, ID: h.ID}.marshal(b[:])
	_, err := s.c.Write(b[:])
	return err
}

// errnoOf is the errno a response reports for err (EIO if none).
func errnoOf(err error) uint32 {
	var en syscall.Errno
	if errors.As(err, &en) {
		return uint32(en)
	}
	return uint32(syscall.EIO)
}

// open is server_open: the path follows the header; the file is
// created with the client's permission bits. ok is false when the
// connection cannot go on (the path was not received).
func (s *rcServer) open(h rcHdr) (status uint32, ok bool) {
	fmt.Fprint(s.out, "opening: ")
	if s.f != nil {
		// As C: the path stays unread and the connection ends.
		fmt.Fprint(s.out, "cannot open another file\n")
		return uint32(syscall.EBUSY), false
	}
	p := make([]byte, int(h.Len)-rcHdrLen)
	if _, err := io.ReadFull(s.c, p); err != nil {
		fmt.Fprint(s.out, "error receiving path\n")
		return uint32(syscall.EIO), false
	}
	if i := strings.IndexByte(string(p), 0); i >= 0 {
		p = p[:i]
	}
	fmt.Fprintf(s.out, "%s, ", p)
	f, err := os.OpenFile(string(p), os.O_RDWR|os.O_CREATE|os.O_TRUNC, os.FileMode(h.Data&0o777))
	if err != nil {
		fmt.Fprint(s.out, "unable to open destination file\n")
		return errnoOf(err), true
	}
	s.f = f
	return 0, true
}

// write is server_write: the size follows the header, then the data.
func (s *rcServer) write(h rcHdr) (status uint32, ok bool) {
	fmt.Fprint(s.out, "transferring")
	if s.f == nil {
		fmt.Fprint(s.out, "...file not opened\n")
		return uint32(syscall.EINVAL), true
	}
	if h.Len != rcWriteLen {
		fmt.Fprintf(s.out, "...invalid message length %d\n", h.Len)
		return uint32(syscall.EINVAL), true
	}
	var b [8]byte
	if _, err := io.ReadFull(s.c, b[:]); err != nil {
		return uint32(syscall.EIO), false
	}
	size := binary.NativeEndian.Uint64(b[:])
	if size > 1<<62 {
		fmt.Fprintf(s.out, "...invalid size %d\n", size)
		return uint32(syscall.EFBIG), false
	}
	fmt.Fprintf(s.out, "...%d bytes...", size)
	if n, err := io.CopyN(s.f, s.c, int64(size)); err != nil {
		fmt.Fprint(s.out, "...error receiving data\n")
		if n < int64(size) {
			return uint32(syscall.EIO), false
		}
		return errnoOf(err), true
	}
	return 0, true
}

// rcopyClient is rcopy's client_run.
func rcopyClient(ctx context.Context, o rcOptions, stdout io.Writer) (err error) {
	f, err := os.Open(o.src)
	if err != nil {
		return fmt.Errorf("rcopy: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("rcopy: %w", err)
	}
	mode := uint32(fi.Mode().Perm()) | syscall.S_IFREG
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		mode = st.Mode
	}
	size := fi.Size()
	if 8*((len(o.dst)+8)/8)+rcHdrLen > 0xFFFF {
		return fmt.Errorf("rcopy: destination path of %d bytes: too long for a message", len(o.dst))
	}
	c, err := rsocket.Dial(ctx, "tcp", net.JoinHostPort(o.server, strconv.Itoa(o.port)))
	if err != nil {
		return fmt.Errorf("rcopy: %w", err)
	}
	defer func() {
		c.CloseWrite()
		cli.CloseErr(&err, c.Close)
	}()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	// OPEN: the path, NUL-terminated and padded to a multiple of 8.
	fmt.Fprint(stdout, "opening...")
	plen := (len(o.dst) + 8) &^ 7
	msg := make([]byte, rcHdrLen+plen)
	rcHdr{Command: rcCmdOpen, Len: uint16(len(msg)), Data: mode}.marshal(msg)
	copy(msg[rcHdrLen:], o.dst)
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("rcopy: open: %w", err)
	}
	if err := rcResponse(c, rcCmdOpen); err != nil {
		return fmt.Errorf("rcopy: open %s on the server: %w", o.dst, err)
	}

	fmt.Fprint(stdout, "transferring")
	msg = msg[:rcWriteLen]
	rcHdr{Command: rcCmdWrite, Len: rcWriteLen}.marshal(msg)
	binary.NativeEndian.PutUint64(msg[rcHdrLen:], uint64(size))
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("rcopy: write: %w", err)
	}
	fmt.Fprint(stdout, "...")
	start := time.Now()
	n, werr := io.Copy(c, io.LimitReader(f, size))
	if werr == nil && n < size {
		werr = fmt.Errorf("%s shrank to %d bytes while it was sent", o.src, n)
	}
	if werr == nil {
		werr = rcResponse(c, rcCmdWrite)
	}
	elapsed := time.Since(start)

	// CLOSE, even after a failed write, as C.
	fmt.Fprint(stdout, "closing...")
	rcHdr{Command: rcCmdClose, Len: rcHdrLen}.marshal(msg)
	cerr := error(nil)
	if _, err := c.Write(msg[:rcHdrLen]); err != nil {
		cerr = err
	} else if cerr = rcResponse(c, rcCmdClose); cerr == nil {
		fmt.Fprint(stdout, "done\n")
	}
	if werr != nil {
		return fmt.Errorf("rcopy: write %s: %w", o.src, werr)
	}
	if cerr != nil {
		return fmt.Errorf("rcopy: close: %w", cerr)
	}
	usec := float32(elapsed.Microseconds())
	fmt.Fprintf(stdout, "%d bytes in %s seconds = %s Gb/sec\n", size, cli.CFloat(float64(usec)/1e6),
		cli.CFloat(float64(size*8)/(1000*float64(usec))))
	return nil
}

// rcResponse reads the response to cmd: an error if it is malformed or
// reports a failure (the errno the server sent).
func rcResponse(c *rsocket.Conn, cmd uint8) error {
	var b [rcHdrLen]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return err
	}
	h := parseRcHdr(b[:])
	switch {
	case h.Version != 0 || h.Len < rcHdrLen:
		return fmt.Errorf("invalid version %d or length %d", h.Version, h.Len)
	case h.Len != rcHdrLen || h.Command != cmd|rcCmdResp:
		return fmt.Errorf("invalid length %d or bad command response %x:%x", h.Len, h.Command, cmd|rcCmdResp)
	case h.Data != 0:
		return fmt.Errorf("the server answered %w", syscall.Errno(h.Data))
	}
	return nil
}
