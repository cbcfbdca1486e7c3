package vm

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The guest half of the two-VM bed (peer.go): the links, the rxe device
// on the data link, and rxevm-peer, its server (in both VMs) and its
// client (the command on PATH).

// setupLink sets up side's end of both links: finds the virtio-net
// devices by their MAC addresses, names them, gives them their MTU and
// addresses, pins the other end's neighbours, adds linkDev on the data
// link and checks that its active_mtu is wantActiveMTU.
func setupLink(l *linkConfig) error {
	n, err := bedNetwork(l.Side, netdevByMAC)
	if err != nil {
		return err
	}
	if err := applyNetwork(n); err != nil {
		return fmt.Errorf("bed link: %w", err)
	}
	for _, dev := range []string{linkNetdev, mgmtNetdev} {
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+dev+"/rp_filter", []byte("0"), 0o644); err != nil {
			return fmt.Errorf("bed link: %w", err)
		}
	}
	if err := addLinks("rxe", [][2]string{{linkDev, linkNetdev}}); err != nil {
		return fmt.Errorf("bed link: %w", err)
	}
	mtu, err := activeMTU(linkDev)
	if err != nil {
		return fmt.Errorf("bed link: %w", err)
	}
	if mtu != wantActiveMTU {
		return fmt.Errorf("bed link: %s on %s (MTU %d): active_mtu %d, want %d", linkDev, linkNetdev, linkMTU, mtu, wantActiveMTU)
	}
	return nil
}

// bedNetwork is side's end of the two-VM bed's links: the virtio-net
// devices (found by byMAC) renamed, the data link's MTU, addresses, and
// the other end's neighbours pinned.
func bedNetwork(side int, byMAC func(mac string) (string, error)) (*network, error) {
	o := 1 - side
	n := &network{}
	for _, d := range []struct {
		mac, name, addr string
		mtu             uint32
	}{
		{linkMACs[side], linkNetdev, linkAddrs[side], linkMTU},
		{mgmtMACs[side], mgmtNetdev, mgmtAddrs[side], 0},
	} {
		cur, err := byMAC(d.mac)
		if err != nil {
			return nil, err
		}
		n.Links = append(n.Links, link{Name: cur, Rename: d.name, MTU: d.mtu, Up: true})
		n.Addrs = append(n.Addrs, addr{Dev: d.name, Prefix: prefix(d.addr + "/24")})
	}
	n.Neighs = []neigh{
		{Addr: netip.MustParseAddr(linkAddrs[o]), Dev: linkNetdev, MAC: linkMACs[o]},
		{Addr: netip.MustParseAddr(mgmtAddrs[o]), Dev: mgmtNetdev, MAC: mgmtMACs[o]},
	}
	return n, nil
}

// netdevByMAC names the network device with hardware address mac.
func netdevByMAC(mac string) (string, error) {
	ents, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return "", fmt.Errorf("bed link: %w", err)
	}
	for _, e := range ents {
		b, err := os.ReadFile("/sys/class/net/" + e.Name() + "/address")
		if err == nil && strings.TrimSpace(string(b)) == mac {
			return e.Name(), nil
		}
	}
	return "", fmt.Errorf("bed link: no network device with MAC %s (is virtio_net loaded?)", mac)
}

// activeMTU is port 1's active_mtu in bytes as rdma-core's ibv_devinfo
// reports it.
func activeMTU(dev string) (int, error) {
	out, err := exec.Command("ibv_devinfo", "-d", dev, "-i", "1").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ibv_devinfo -d %s (Debian package ibverbs-utils, scripts/install-deps): %v: %s", dev, err, strings.TrimSpace(string(out)))
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "active_mtu:" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("ibv_devinfo -d %s: no active_mtu line in %q", dev, out)
}

// installPeerCommand puts rxevm-peer (this executable) in peerBinDir and
// that folder at the end of env's PATH.
func installPeerCommand(env []string) ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(peerBinDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Symlink(exe, filepath.Join(peerBinDir, PeerCommand)); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(env)+1)
	found := false
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + p + ":" + peerBinDir
			found = true
		}
		out = append(out, kv)
	}
	if !found {
		out = append(out, "PATH=/usr/local/bin:/usr/bin:/bin:"+peerBinDir)
	}
	return out, nil
}

// The rxevm-peer protocol, over TCP on the management link: the client
// sends one JSON peerRequest line; the server answers with frames of a
// type byte, a 4-byte big-endian length and the payload.
const (
	frameHello  = 'H' // peerHello, the answer to "hello"
	frameStdout = 'O'
	frameStderr = 'E'
	frameAlive  = 'K' // empty, every peerAliveEvery while the command runs
	frameExit   = 'X' // peerExit, the last frame
)

const (
	peerAliveEvery = 2 * time.Second
	// peerSilence is how long the client waits for any frame before it
	// calls the peer VM hung; a frame comes every peerAliveEvery.
	peerSilence = 45 * time.Second
	// peerConnectLimit bounds the client's connection attempts.
	peerConnectLimit = 30 * time.Second
	// peerReadyLimit bounds the first VM's wait for the peer's server at
	// boot, inside bootLimit.
	peerReadyLimit = 150 * time.Second
)

type peerRequest struct {
	Token string
	Op    string // "hello" or "run"
	Args  []string
	Dir   string
	Env   []string
}

type peerHello struct {
	Kernel    string
	Dev       string
	ActiveMTU int
}

type peerExit struct {
	ExitCode int
	Error    string // the command did not start, or the request was refused
}

// ownedEnv are the environment variables that describe the VM a command
// runs on: the server sets its own values over the client's.
var ownedEnv = []string{"PURERDMA_REQUIRE_DEVICE", "PURERDMA_VM", "PURERDMA_VM_PACKAGE", "PURERDMA_PMEM",
	EnvLocalAddr, EnvPeerAddr, EnvLocalDev, EnvPeerDev, EnvPeerVM}

func writeFrame(w io.Writer, typ byte, payload []byte) error {
	b := make([]byte, 5+len(payload))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:], uint32(len(payload)))
	copy(b[5:], payload)
	_, err := w.Write(b)
	return err
}

func readFrame(r io.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > 16<<20 {
		return 0, nil, fmt.Errorf("frame of %d bytes", n)
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r, p)
	return h[0], p, err
}

// peerServer serves rxevm-peer requests on this VM's management address.
type peerServer struct {
	link  *linkConfig
	env   []string // this VM's command environment
	kern  string
	log   io.Writer // the console
	logMu sync.Mutex
}

func (s *peerServer) logf(format string, a ...any) {
	s.logMu.Lock()
	fmt.Fprintf(s.log, "rxevm-peer server: "+format+"\n", a...)
	s.logMu.Unlock()
}

// startPeerServer listens and serves in the background.
func startPeerServer(l *linkConfig, env []string, log io.Writer) error {
	var u syscall.Utsname
	syscall.Uname(&u)
	kern := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		kern = append(kern, byte(c))
	}
	ln, err := net.Listen("tcp4", net.JoinHostPort(mgmtAddrs[l.Side], strconv.Itoa(peerPort)))
	if err != nil {
		return fmt.Errorf("rxevm-peer server: %w", err)
	}
	s := &peerServer{link: l, env: env, kern: string(kern), log: log}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				s.logf("%v", err)
				return
			}
			go s.serve(c)
		}
	}()
	return nil
}

func (s *peerServer) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return
	}
	var req peerRequest
	var wmu sync.Mutex
	send := func(typ byte, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return writeFrame(c, typ, p)
	}
	exit := func(e peerExit) {
		b, _ := json.Marshal(e)
		send(frameExit, b)
	}
	if err := json.Unmarshal(line, &req); err != nil {
		exit(peerExit{ExitCode: ExitVMFailed, Error: "bad request: " + err.Error()})
		return
	}
	if req.Token != s.link.Token {
		exit(peerExit{ExitCode: ExitVMFailed, Error: "bad token"})
		return
	}
	switch req.Op {
	case "hello":
		mtu, err := activeMTU(linkDev)
		if err != nil {
			s.logf("%v", err)
		}
		b, _ := json.Marshal(peerHello{Kernel: s.kern, Dev: linkDev, ActiveMTU: mtu})
		send(frameHello, b)
		return
	case "run":
	default:
		exit(peerExit{ExitCode: ExitVMFailed, Error: fmt.Sprintf("unknown request %q", req.Op)})
		return
	}
	if len(req.Args) == 0 {
		exit(peerExit{ExitCode: ExitVMFailed, Error: "no command"})
		return
	}
	env := mergeEnv(req.Env, s.env)
	path, err := lookPath(req.Args[0], env)
	if err != nil {
		exit(peerExit{ExitCode: 127, Error: err.Error()})
		return
	}
	s.logf("%q in %s", req.Args, req.Dir)
	cmd := exec.Command(path, req.Args[1:]...)
	cmd.Args[0] = req.Args[0]
	cmd.Dir = req.Dir
	cmd.Env = env
	cmd.Stdout = frameWriter{frameStdout, send}
	cmd.Stderr = frameWriter{frameStderr, send}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second // output pipes held open by what the command left running
	if err := cmd.Start(); err != nil {
		exit(peerExit{ExitCode: 127, Error: err.Error()})
		return
	}
	done := make(chan struct{})
	go func() { // keepalive: the client tells a hung VM from a quiet command
		t := time.NewTicker(peerAliveEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				send(frameAlive, nil)
			}
		}
	}()
	go func() { // the client went away: end the command and its group
		io.Copy(io.Discard, br)
		select {
		case <-done:
		default:
			s.logf("client gone: killing %q", req.Args)
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
	err = cmd.Wait()
	close(done)
	e := peerExit{}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		ws := exitErr.Sys().(syscall.WaitStatus)
		e.ExitCode = ws.ExitStatus()
		if ws.Signaled() {
			e.ExitCode = 128 + int(ws.Signal())
		}
	default:
		e.ExitCode = ExitVMFailed
		e.Error = err.Error()
	}
	exit(e)
}

type frameWriter struct {
	typ  byte
	send func(byte, []byte) error
}

func (w frameWriter) Write(p []byte) (int, error) {
	if err := w.send(w.typ, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// mergeEnv is env with the values of ownedEnv taken from own.
func mergeEnv(env, own []string) []string {
	owned := func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		for _, o := range ownedEnv {
			if name == o {
				return true
			}
		}
		return false
	}
	var out []string
	for _, kv := range env {
		if !owned(kv) {
			out = append(out, kv)
		}
	}
	for _, kv := range own {
		if owned(kv) {
			out = append(out, kv)
		}
	}
	return out
}

// lookPath finds name in env's PATH, as the client's shell would.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = p
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH on the peer VM", name)
}

// readLinkConfig reads this VM's place in the bed from the run's
// configuration in the out share.
func readLinkConfig() (*linkConfig, error) {
	var gc guestConfig
	b, err := os.ReadFile(filepath.Join(outDir, "config.json"))
	if err == nil {
		err = json.Unmarshal(b, &gc)
	}
	if err != nil {
		return nil, fmt.Errorf("not in an rxevm VM (%v)", err)
	}
	if gc.Link == nil {
		return nil, errors.New("this rxevm VM has no peer (rxevm -peer KERNEL boots one)")
	}
	return gc.Link, nil
}

// peerGone is why the peer VM stopped, when the host said so, with the
// peer's last console lines.
func peerGone() (string, bool) {
	b, err := os.ReadFile(filepath.Join(outDir, peerExitFile))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)) + peerConsole(), true
}

// peerConsole is the peer console's last lines as the host mirrors them.
func peerConsole() string {
	b, _ := os.ReadFile(filepath.Join(outDir, peerConsoleFile))
	return string(b)
}

// peerCall connects to the other VM's server and sends req; it retries
// a refused connection (a server not up yet) until deadline.
func peerCall(l *linkConfig, req peerRequest, deadline time.Time) (net.Conn, error) {
	req.Token = l.Token
	addr := net.JoinHostPort(mgmtAddrs[1-l.Side], strconv.Itoa(peerPort))
	for {
		c, err := net.DialTimeout("tcp4", addr, 5*time.Second)
		if err == nil {
			b, _ := json.Marshal(req)
			if _, err = c.Write(append(b, '\n')); err == nil {
				return c, nil
			}
			c.Close()
		}
		if why, gone := peerGone(); gone {
			return nil, errors.New(why)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("connecting to the peer VM's rxevm-peer server at %s: %w", addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitForPeer waits until the other VM's server answers and checks its
// link device's active_mtu.
func waitForPeer(l *linkConfig) error {
	c, err := peerCall(l, peerRequest{Op: "hello"}, time.Now().Add(peerReadyLimit))
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(peerSilence))
	typ, p, err := readFrame(c)
	if err != nil {
		return fmt.Errorf("the peer VM's rxevm-peer server did not answer: %w", err)
	}
	if typ != frameHello {
		return fmt.Errorf("the peer VM's rxevm-peer server answered %q: %s", typ, p)
	}
	var h peerHello
	if err := json.Unmarshal(p, &h); err != nil {
		return fmt.Errorf("the peer VM's hello: %w", err)
	}
	if h.ActiveMTU != wantActiveMTU {
		return fmt.Errorf("the peer VM's %s: active_mtu %d, want %d", h.Dev, h.ActiveMTU, wantActiveMTU)
	}
	return nil
}

// PeerMain is rxevm-peer, the command on PATH in both VMs of the bed: it
// runs args on the other VM in the current directory with the current
// environment (but for the variables that describe the VM), streams the
// command's stdout and stderr, and returns its exit status. A peer VM
// that stopped, or that sends nothing for 45 s (a running command's
// server sends a keepalive every 2 s), ends it with status 125 and a
// message on stderr with the peer's last console lines.
func PeerMain(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: rxevm-peer CMD [ARGS...]: run CMD on the other VM of the rxevm -peer bed")
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "rxevm-peer: %s on the peer VM: %v\n", args[0], err)
		return ExitVMFailed
	}
	l, err := readLinkConfig()
	if err != nil {
		return fail(err)
	}
	dir, err := os.Getwd()
	if err != nil {
		return fail(err)
	}
	c, err := peerCall(l, peerRequest{Op: "run", Args: args, Dir: dir, Env: os.Environ()}, time.Now().Add(peerConnectLimit))
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		br := bufio.NewReader(c)
		for {
			c.SetReadDeadline(time.Now().Add(peerSilence))
			typ, p, err := readFrame(br)
			if err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					err = fmt.Errorf("the peer VM sent nothing for %v (hung?)%s", peerSilence, peerConsole())
				} else {
					err = fmt.Errorf("the connection to the peer VM broke: %w%s", err, peerConsole())
				}
				done <- result{err: err}
				return
			}
			switch typ {
			case frameStdout:
				os.Stdout.Write(p)
			case frameStderr:
				os.Stderr.Write(p)
			case frameAlive:
			case frameExit:
				var e peerExit
				if err := json.Unmarshal(p, &e); err != nil {
					done <- result{err: err}
					return
				}
				if e.Error != "" {
					fmt.Fprintf(os.Stderr, "rxevm-peer: %s on the peer VM: %s\n", args[0], e.Error)
				}
				done <- result{code: e.ExitCode}
				return
			default:
				done <- result{err: fmt.Errorf("unknown frame %q from the peer VM", typ)}
				return
			}
		}
	}()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				return fail(r.err)
			}
			return r.code
		case <-t.C:
			if why, gone := peerGone(); gone {
				return fail(errors.New(why))
			}
		}
	}
}
