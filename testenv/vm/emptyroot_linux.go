package vm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/purerdma/rdma/internal/rdmanl"
	"golang.org/x/sys/unix"
)

// emptyRootMain is the empty-root VM's PID 1 (EmptyRoot): the kernel
// started it as /init with emptyRootArg. It never returns.
func emptyRootMain() {
	console := os.Stdout // the kernel opened /dev/console as fds 0-2
	if t, err := unix.IoctlGetTermios(int(console.Fd()), unix.TCGETS); err == nil {
		t.Oflag &^= unix.OPOST // raw: the steps' bytes reach the host as written
		unix.IoctlSetTermios(int(console.Fd()), unix.TCSETS, t)
	}
	var st rootStatus
	b, err := os.ReadFile(rootConfigPath)
	var cfg rootConfig
	if err == nil {
		err = json.Unmarshal(b, &cfg)
	}
	if err != nil {
		fmt.Fprintf(console, "rxevm-init: reading the run config: %v\n", err)
	} else {
		st = emptyRootRun(cfg, console)
		if cfg.Dmesg {
			buf := make([]byte, 1<<20)
			if n, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf); err == nil {
				st.Dmesg = string(buf[:n])
			}
		}
		line, _ := json.Marshal(st)
		fmt.Fprintf(console, "%s%s\n", rootStatusLine(cfg.Marker), line)
	}
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func emptyRootRun(cfg rootConfig, console *os.File) rootStatus {
	fail := func(err error) rootStatus { return rootStatus{Error: err.Error()} }
	for _, m := range []struct{ fs, dir string }{{"proc", "/proc"}, {"sysfs", "/sys"}, {"devtmpfs", "/dev"}} {
		if err := unix.Mount(m.fs, m.dir, m.fs, 0, ""); err != nil {
			return fail(fmt.Errorf("mount %s on %s: %w", m.fs, m.dir, err))
		}
	}
	for _, p := range cfg.Modules {
		if err := loadModule(p); err != nil {
			return fail(err)
		}
	}
	unix.Sethostname([]byte("rxevm"))
	if err := setupNetwork(); err != nil {
		return fail(err)
	}
	if err := setupRXE(); err != nil {
		return fail(err)
	}
	devs, err := rdmaDeviceIndexes()
	if err != nil {
		return fail(err)
	}
	var st rootStatus
	mounts, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return fail(err)
	}
	st.Report.Mounts = string(mounts)
	if st.Report.Files, err = rootFiles(); err != nil {
		return fail(err)
	}

	fmt.Fprintf(console, "\nRXEVM-START-%s\n", cfg.Marker)
	start := time.Now()
	st.Report.Steps = runSteps(cfg.Steps, devs, console)
	st.Command = time.Since(start)
	fmt.Fprintf(console, "\nRXEVM-END-%s\n", cfg.Marker)
	return st
}

// loadModule loads one .ko with finit_module(2), as insmod does.
func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("loading %s: %w", filepath.Base(path), err)
	}
	return nil
}

func rdmaDeviceIndexes() ([]uint32, error) {
	c, err := rdmanl.Dial()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ds, err := c.Devices()
	if err != nil {
		return nil, err
	}
	var out []uint32
	for _, d := range ds {
		out = append(out, d.Index)
	}
	return out, nil
}

// rootFiles lists the root file system outside the kernel's own
// (/proc, /sys, /dev): regular files by path, anything else but folders
// as "path (type)".
func rootFiles() ([]string, error) {
	var out []string
	err := filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case p == "/proc" || p == "/sys" || p == "/dev":
			return fs.SkipDir
		case d.IsDir():
		case d.Type().IsRegular():
			out = append(out, p)
		default:
			out = append(out, fmt.Sprintf("%s (%v)", p, d.Type()))
		}
		return nil
	})
	return out, err
}

// stepRun is a started step.
type stepRun struct {
	step   Step
	cmd    *exec.Cmd
	cancel context.CancelFunc
	out    *stepOutput
	start  time.Time
	done   chan struct{} // closed when the step ended; res is then set
	res    StepResult
	ready  error // from waitListening
}

// runSteps runs steps in order (runStep); after a step that could not
// start or was not ready, the rest do not run and background steps are
// killed.
func runSteps(steps []Step, devs []uint32, console io.Writer) []StepResult {
	var mu sync.Mutex // the console, for whole lines
	results := make([]StepResult, len(steps))
	var runs []*stepRun
	stop := ""
	for i, s := range steps {
		if stop != "" {
			results[i] = StepResult{Name: s.Name, ExitCode: -1, Error: "not run: " + stop}
			continue
		}
		prefix := ""
		if len(steps) > 1 {
			prefix = s.Name + "| "
		}
		r, err := startStep(s, prefix, &mu, console)
		if err != nil {
			results[i] = StepResult{Name: s.Name, ExitCode: -1, Error: err.Error()}
			stop = "step " + s.Name + " did not start"
			continue
		}
		runs = append(runs, r)
		if !s.Background {
			<-r.done
			continue
		}
		if s.Listen != "" {
			if r.ready = r.waitListening(devs); r.ready != nil {
				stop = "step " + s.Name + " was not ready"
			}
		}
	}
	for _, r := range runs {
		if stop != "" {
			r.cancel()
		}
		<-r.done
	}
	for i, s := range steps {
		for _, r := range runs {
			if r.step.Name == s.Name {
				results[i] = r.res
				if r.ready != nil {
					results[i].Error = "not ready: " + r.ready.Error()
				}
			}
		}
	}
	return results
}

func startStep(s Step, prefix string, mu *sync.Mutex, console io.Writer) (*stepRun, error) {
	timeout := s.Timeout
	if timeout == 0 {
		timeout = rootStepTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	cmd := exec.CommandContext(ctx, s.Args[0], s.Args[1:]...)
	cmd.Dir = "/"
	cmd.Env = s.Env
	if cmd.Env == nil {
		cmd.Env = []string{"PATH=/bin"}
	}
	r := &stepRun{step: s, cmd: cmd, cancel: cancel, done: make(chan struct{}),
		out: &stepOutput{prefix: prefix, mu: mu, console: console}}
	cmd.Stdout = r.out
	cmd.Stderr = r.out
	cmd.WaitDelay = 2 * time.Second
	if s.User != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential:  &syscall.Credential{Uid: s.User, Gid: s.User, Groups: []uint32{}},
			AmbientCaps: s.Caps,
		}
	}
	// The child inherits the limit at fork; PID 1 puts its own back after.
	var old unix.Rlimit
	if s.Memlock != 0 {
		if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
			cancel()
			return nil, err
		}
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: s.Memlock, Max: s.Memlock}); err != nil {
			cancel()
			return nil, fmt.Errorf("setting RLIMIT_MEMLOCK: %w", err)
		}
	}
	r.start = time.Now()
	err := cmd.Start()
	if s.Memlock != 0 {
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
			panic(err) // every later step would run with the raised limit
		}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		// Read the credentials and limits from the exited process before
		// Wait reaps it; right after Start they may not be final, since
		// exec closes the fd Start waits on before it commits them.
		pid := cmd.Process.Pid
		for {
			var info unix.Siginfo
			if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
				break
			}
		}
		process := processFacts(pid)
		err := cmd.Wait()
		r.out.flush()
		r.res = StepResult{Name: s.Name, Output: r.out.String(), Duration: time.Since(r.start), Process: process}
		r.res.ExitCode = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.res.ExitCode = 128 + int(ws.Signal())
		}
		switch {
		case ctx.Err() == context.DeadlineExceeded:
			r.res.Error = fmt.Sprintf("killed after its timeout of %v", timeout)
		case ctx.Err() != nil:
			r.res.Error = "killed: an earlier step failed"
		case err != nil && !errors.As(err, new(*exec.ExitError)):
			r.res.Error = err.Error()
		}
		cancel()
		close(r.done)
	}()
	return r, nil
}

// processFacts is StepResult.Process.
func processFacts(pid int) string {
	var b strings.Builder
	for _, f := range []struct {
		file  string
		lines []string
	}{
		{"status", []string{"Uid:", "Gid:", "Groups:", "CapInh:", "CapPrm:", "CapEff:", "CapAmb:"}},
		{"limits", []string{"Max locked memory"}},
	} {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + f.file)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", f.file, err)
			continue
		}
		for _, l := range strings.Split(string(data), "\n") {
			for _, p := range f.lines {
				if strings.HasPrefix(l, p) {
					b.WriteString(l + "\n")
				}
			}
		}
	}
	return b.String()
}

// waitListening waits until the step has an rdma_cm ID listening on
// its Listen address, while it runs and within its timeout.
func (r *stepRun) waitListening(devs []uint32) error {
	want := netip.MustParseAddrPort(r.step.Listen)
	for {
		ls, err := cmListeners(devs)
		if err != nil {
			return err
		}
		for _, l := range ls {
			if l.Addr == want && isThreadOf(r.cmd.Process.Pid, l.TID) {
				return nil
			}
		}
		select {
		case <-r.done:
			return fmt.Errorf("it ended before it listened on %v", want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func isThreadOf(pid, tid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid))
	return err == nil
}

// stepOutput keeps a step's output and copies it to the console line by
// line, each line prefixed.
type stepOutput struct {
	prefix  string
	mu      *sync.Mutex
	console io.Writer

	own     sync.Mutex
	all     bytes.Buffer
	partial []byte
}

func (o *stepOutput) Write(p []byte) (int, error) {
	o.own.Lock()
	defer o.own.Unlock()
	o.all.Write(p)
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		o.line(o.partial[:i+1])
		o.partial = o.partial[i+1:]
	}
	return len(p), nil
}

func (o *stepOutput) line(l []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.console.Write(append([]byte(o.prefix), l...))
}

func (o *stepOutput) flush() {
	o.own.Lock()
	defer o.own.Unlock()
	if len(o.partial) > 0 {
		o.line(append(o.partial, '\n'))
		o.partial = nil
	}
}

func (o *stepOutput) String() string {
	o.own.Lock()
	defer o.own.Unlock()
	return o.all.String()
}
