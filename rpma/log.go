package rpma

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// LogLevel is a librpma log level (enum rpma_log_level): lower is more
// severe. A message is logged when its level is at or below the
// threshold.
type LogLevel int

// The librpma log levels.
const (
	LogDisabled LogLevel = -1 // RPMA_LOG_DISABLED: nothing is logged
	LogFatal    LogLevel = 0  // the library stops working at once
	LogError    LogLevel = 1  // the library stops working properly
	LogWarning  LogLevel = 2  // an error the caller can handle
	LogNotice   LogLevel = 3  // connection life: established, closed, ...
	LogInfo     LogLevel = 4  // an indication per operation
	LogDebug    LogLevel = 5  // operation dumps
)

var logLevelNames = [...]string{"FATAL", "ERROR", "WARNING", "NOTICE", "INFO", "DEBUG"}

func (l LogLevel) String() string {
	if l == LogDisabled {
		return "DISABLED"
	}
	if l >= 0 && int(l) < len(logLevelNames) {
		return logLevelNames[l]
	}
	return fmt.Sprintf("LogLevel(%d)", int(l))
}

// SlogLevel is the slog level messages of level l are logged at:
// FATAL and ERROR above slog.LevelError, WARNING at LevelWarn, NOTICE
// between LevelInfo and LevelWarn, INFO at LevelInfo, DEBUG at
// LevelDebug.
func (l LogLevel) SlogLevel() slog.Level {
	switch l {
	case LogFatal:
		return slog.LevelError + 4
	case LogError:
		return slog.LevelError
	case LogWarning:
		return slog.LevelWarn
	case LogNotice:
		return slog.LevelInfo + 2
	case LogInfo:
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// LogThreshold selects one of the two thresholds (enum
// rpma_log_threshold).
type LogThreshold int

const (
	// LogThresholdPrimary decides which messages reach the logger at
	// all (RPMA_LOG_THRESHOLD). Default: LogWarning.
	LogThresholdPrimary LogThreshold = 0
	// LogThresholdAux is the second threshold (RPMA_LOG_THRESHOLD_AUX):
	// with the default logger, messages at or below it are written to
	// standard error in C's format (time, level, file:line, function)
	// instead of going to slog.Default, and the others that pass the
	// primary threshold go to slog.Default. Default: LogDisabled.
	LogThresholdAux LogThreshold = 1
)

var thresholds = [2]atomic.Int32{}

var logState struct {
	mu     sync.Mutex
	logger atomic.Pointer[slog.Logger] // nil: the default
	stderr io.Writer
}

func init() {
	thresholds[LogThresholdPrimary].Store(int32(LogWarning))
	thresholds[LogThresholdAux].Store(int32(LogDisabled))
	logState.stderr = os.Stderr
}

// SetLogThreshold sets a threshold (rpma_log_set_threshold). It is safe
// for concurrent use.
func SetLogThreshold(t LogThreshold, level LogLevel) error {
	const op = "log set threshold"
	if t != LogThresholdPrimary && t != LogThresholdAux {
		return invalid(op, "threshold %d", int(t))
	}
	if level < LogDisabled || level > LogDebug {
		return invalid(op, "level %d", int(level))
	}
	thresholds[t].Store(int32(level))
	return nil
}

// GetLogThreshold reads a threshold (rpma_log_get_threshold).
func GetLogThreshold(t LogThreshold) (LogLevel, error) {
	if t != LogThresholdPrimary && t != LogThresholdAux {
		return 0, invalid("log get threshold", "threshold %d", int(t))
	}
	return LogLevel(thresholds[t].Load()), nil
}

// SetLogger sends the package's messages to l (rpma_log_set_function);
// nil restores the default, slog.Default() plus standard error for the
// auxiliary threshold. Each message carries the attributes
// "rpma_level" (the LogLevel's name), "func", "file" and "line".
func SetLogger(l *slog.Logger) {
	logState.logger.Store(l)
}

// logf logs a message at level if the primary threshold lets it pass.
// The formatting happens only then.
func logf(level LogLevel, format string, args ...any) {
	if level > LogLevel(thresholds[LogThresholdPrimary].Load()) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(2, pcs[:])
	fr, _ := runtime.CallersFrames(pcs[:]).Next()
	msg := fmt.Sprintf(format, args...)
	attrs := []slog.Attr{slog.String("rpma_level", level.String()), slog.String("func", fr.Function),
		slog.String("file", fr.File), slog.Int("line", fr.Line)}
	l := logState.logger.Load()
	if l == nil {
		if level <= LogLevel(thresholds[LogThresholdAux].Load()) {
			// Written here instead of through slog.Default, whose
			// default handler writes to standard error too: the
			// message appears once.
			logState.mu.Lock()
			fmt.Fprintf(logState.stderr, "%s %s: %s:%d %s: %s\n", time.Now().Format(time.RFC3339Nano), level, fr.File, fr.Line, fr.Function, msg)
			logState.mu.Unlock()
			return
		}
		l = slog.Default()
	}
	l.LogAttrs(context.Background(), level.SlogLevel(), msg, attrs...)
}
