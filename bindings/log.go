package bindings

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// ggml log levels (enum ggml_log_level).
const (
	logNone  = 0
	logDebug = 1
	logInfo  = 2
	logWarn  = 3
	logError = 4
	logCont  = 5 // continues the previous message
)

var (
	logOnce     sync.Once
	logCallback uintptr
	logMu       sync.Mutex
	logPending  strings.Builder
	logLast     slog.Level
	logLastRaw  int
	logger      = slog.Default()
)

// LogTap, when set, receives every complete log line with ggml's level
// (1 debug, 2 info, 3 warn, 4 error) before it goes to slog. The conformance
// harness uses it to read llama.cpp's reports.
type LogTap func(level int, line string)

var logTap LogTap

// SetLogTap installs (or, with nil, removes) the tap and returns the old one.
func SetLogTap(t LogTap) LogTap {
	logMu.Lock()
	defer logMu.Unlock()
	old := logTap
	logTap = t
	return old
}

// SetLogger sets where ggml's messages go (default slog.Default()).
func SetLogger(l *slog.Logger) {
	logMu.Lock()
	logger = l
	logMu.Unlock()
}

// installLog routes ggml's log through one callback, created once per
// process (purego never frees callbacks).
func installLog(l *Lib) {
	logOnce.Do(func() {
		logCallback = purego.NewCallback(func(level int32, text *byte, _ uintptr) {
			onLog(level, GoString(text))
		})
	})
	l.LogSet(logCallback, 0)
}

// CallbackAddr returns the log callback for other native libraries of the
// set (libllama's llama_log_set) so that they share the route.
func CallbackAddr() uintptr { return logCallback }

// onLog assembles ggml's line fragments (CONT continues a message) and emits
// one slog record per line.
func onLog(level int32, text string) {
	logMu.Lock()
	defer logMu.Unlock()
	if level != logCont {
		logLast = slogLevel(level)
		logLastRaw = int(level)
	}
	logPending.WriteString(text)
	s := logPending.String()
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		line := s[:i]
		s = s[i+1:]
		if line != "" {
			if logTap != nil {
				logTap(logLastRaw, line)
			}
			logger.Log(context.Background(), logLast, line, "src", "ggml")
		}
	}
	logPending.Reset()
	logPending.WriteString(s)
}

func slogLevel(l int32) slog.Level {
	switch l {
	case logDebug:
		return slog.LevelDebug
	case logWarn:
		return slog.LevelWarn
	case logError:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}
