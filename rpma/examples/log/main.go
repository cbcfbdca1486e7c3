// Command log is librpma's log example in Go: how a program controls
// what the rpma package logs and where. It takes no arguments.
//
//	log
//
// C's default log function writes to syslog, and to standard error the
// messages at or below the auxiliary threshold; rpma's default writes
// to slog.Default() (with its default handler, standard error too, as
// "... INFO msg rpma_level=... func=... file=... line=..."), and to
// standard error what passes the auxiliary threshold (slog's default
// handler itself drops DEBUG messages, as a syslog may). A logger of the
// program's own (rpma.SetLogger) replaces both, as a custom log
// function does in C.
//
// C's worker logs through librpma's internal log macros, which the C
// example compiles in with librpma's log sources; the rpma package
// exports no way to log through it, so the worker here makes rpma do
// things it logs.
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"

	"github.com/purerdma/rdma/rpma"
)

func main() {
	// With the default logger, messages at or below the auxiliary
	// threshold go to standard error in C's format (the others that pass
	// the primary threshold go to slog.Default).
	fmt.Printf("Let's write messages to stderr\n")
	rpma.SetLogThreshold(rpma.LogThresholdPrimary, rpma.LogDebug)
	rpma.SetLogThreshold(rpma.LogThresholdAux, rpma.LogDebug)
	logWorkerIsDoingSomething()

	// Messages only to the program's own logger.
	rpma.SetLogger(slog.New(userLogHandler{}))
	fmt.Printf("Let's use custom log function to write messages to stderr\nNo message should be written to the default slog logger\n")
	logWorkerIsDoingSomething()
	rpma.SetLogger(nil)
}

// logWorkerIsDoingSomething makes rpma log: it decodes a peer
// configuration's descriptor (an INFO message) and a memory region's
// (a DEBUG message).
func logWorkerIsDoingSomething() {
	if _, err := rpma.PeerCfgFromDescriptor([]byte{1}); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
	}
	desc := binary.LittleEndian.AppendUint64(nil, 0x7f0000001000) // address
	desc = binary.LittleEndian.AppendUint64(desc, 720401)         // length
	desc = binary.LittleEndian.AppendUint32(desc, 0x102)          // rkey
	desc = append(desc, byte(rpma.UsageReadSrc|rpma.UsageWriteDst))
	if _, err := rpma.RemoteMRFromDescriptor(desc); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
	}
}

// userLogHandler is the program's own logger (user_log_function): it
// writes each message to standard error with where rpma logged it and
// its librpma level's number.
type userLogHandler struct{}

func (userLogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h userLogHandler) Handle(_ context.Context, r slog.Record) error {
	var file, fn, level string
	line := int64(-1)
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "file":
			file = a.Value.String()
		case "func":
			fn = a.Value.String()
		case "line":
			line = a.Value.Int64()
		case "rpma_level":
			level = a.Value.String()
		}
		return true
	})
	fmt.Fprintf(os.Stderr, "Custom log handling: \n")
	if file != "" {
		fmt.Fprintf(os.Stderr, "%s %4d %s:\n", file, line, fn)
	}
	fmt.Fprintf(os.Stderr, "level: %d %s", levelNumber(level), r.Message)
	if file != "" {
		fmt.Fprintf(os.Stderr, "\n")
	}
	return nil
}

func (h userLogHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h userLogHandler) WithGroup(string) slog.Handler      { return h }

// levelNumber is the number of a librpma level by its name
// (enum rpma_log_level), -1 when unknown.
func levelNumber(name string) int {
	for l := rpma.LogFatal; l <= rpma.LogDebug; l++ {
		if l.String() == name {
			return int(l)
		}
	}
	return int(rpma.LogDisabled)
}
