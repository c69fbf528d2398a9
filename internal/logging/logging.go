// Package logging builds the daemons' log/slog loggers (text or JSON lines
// with a time and a level) and adapts to them the printf-style Logf hooks
// of the libraries, memberlist's "[LEVEL] ..." lines included, so that
// every line of a daemon goes through one slog.Handler.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// New returns a logger writing to w in format "text" or "json", at level
// "debug", "info", "warn" or "error" and above.
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// levels are the prefixes memberlist (and Go's log-style libraries) put
// before a line, with their slog level.
var levels = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo}, {"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError},
}

// Logf adapts l to a printf-style hook: each call is one record, at the
// level a leading "[WARN]"-style tag names (the tag removed), else Info.
func Logf(l *slog.Logger) func(format string, args ...any) {
	return func(format string, args ...any) {
		msg, lv := strings.TrimSpace(fmt.Sprintf(format, args...)), slog.LevelInfo
		for _, p := range levels {
			if rest, ok := strings.CutPrefix(msg, p.prefix); ok {
				msg, lv = strings.TrimSpace(rest), p.level
				break
			}
		}
		l.Log(context.Background(), lv, msg)
	}
}
