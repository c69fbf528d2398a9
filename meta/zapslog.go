package meta

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ZapToSlog returns a zap logger (what the etcd client logs to, Config.Logger)
// whose entries at min and above go to l: zap's levels map to slog's, its
// fields become attributes.
func ZapToSlog(l *slog.Logger, min slog.Level) *zap.Logger {
	return zap.New(&slogCore{h: l.Handler(), min: min})
}

// slogCore is a zapcore.Core over a slog.Handler.
type slogCore struct {
	h     slog.Handler
	min   slog.Level
	attrs []slog.Attr
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return slogLevel(l) >= c.min && c.h.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fs []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h, min: c.min, attrs: append(c.attrs[:len(c.attrs):len(c.attrs)], fieldAttrs(fs)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	r.AddAttrs(c.attrs...)
	r.AddAttrs(fieldAttrs(fs)...)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

// fieldAttrs turns zap fields into slog attributes through zap's own
// map encoder.
func fieldAttrs(fs []zapcore.Field) []slog.Attr {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fs {
		f.AddTo(enc)
	}
	out := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, slog.Any(k, v))
	}
	return out
}
