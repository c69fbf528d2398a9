package top

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/nvstripe/nvstripe/internal/table"
	"github.com/nvstripe/nvstripe/internal/units"
)

// Watch reads endpoints (URLs of /metrics) every interval and calls show
// with the rates since the reading before, until ctx ends (nil) or show
// fails; count > 0 stops after that many calls. An endpoint that does not
// answer is left out of that reading (warn says so) and its volumes
// vanish from the rows until it answers again. An interval not above 0 is
// refused.
func Watch(ctx context.Context, endpoints []string, interval time.Duration, count int, warn func(string), show func([]Row) error) error {
	if interval <= 0 {
		return fmt.Errorf("interval %v: give one above 0", interval)
	}
	if len(endpoints) == 0 {
		return errors.New("no metrics endpoint to read: no agent with metrics and no foreground map with --metrics runs here (or name one with --metrics)")
	}
	client := &http.Client{Timeout: max(interval, time.Second)}
	prev := read(ctx, client, endpoints, warn)
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := 0; count <= 0 || n < count; n++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur := read(ctx, client, endpoints, warn)
		if err := show(Rates(prev, cur)); err != nil {
			return err
		}
		prev = cur
	}
	return nil
}

// read reads every endpoint into one Reading.
func read(ctx context.Context, client *http.Client, endpoints []string, warn func(string)) Reading {
	r := Reading{At: time.Now()}
	for _, e := range endpoints {
		if err := Scrape(ctx, client, e, &r); err != nil && ctx.Err() == nil {
			warn(err.Error())
		}
	}
	return r
}

// WriteRows prints rows as a table for people: requests and MiB a
// second, latency percentiles, and the QoS delays.
func WriteRows(out io.Writer, rows []Row) error {
	w := table.NewRight(out)
	fmt.Fprintln(w, "VOLUME\tR/S\tW/S\tRBYTES/S\tWBYTES/S\tP50\tP99\tP99.99\tQOS DELAYED/S\tQOS WAIT\tQOS LIMITS\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t\n", r.Volume, r.ReadIOPS, r.WriteIOPS,
			units.FormatSize(int64(r.ReadBytes)), units.FormatSize(int64(r.WriteBytes)),
			latency(r.P50), latency(r.P99), latency(r.P9999), r.QoSDelayed, latency(r.QoSWait), limits(r.Limits))
	}
	return w.Flush()
}

// latency renders seconds for a table ("-" for none).
func latency(s float64) string {
	switch {
	case s == 0:
		return "-"
	case s > 1e9:
		return "inf"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

// limits renders the QoS limits ("-" for none).
func limits(l map[string]float64) string {
	if len(l) == 0 {
		return "-"
	}
	s := ""
	for _, k := range sortedKeys(l) {
		v := l[k]
		if k == "bps" || k == "read_bps" || k == "write_bps" {
			s += fmt.Sprintf(" %s=%s", k, units.FormatRate(int64(v)))
		} else {
			s += fmt.Sprintf(" %s=%.0f", k, v)
		}
	}
	return s[1:]
}
