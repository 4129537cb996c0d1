package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"runtime/debug"
	"time"

	ferryotel "github.com/ferry-io/ferry/otel"
)

// tracingFlushBudget bounds the flush of the last spans at shutdown.
const tracingFlushBudget = 3 * time.Second

// setupTracing turns OpenTelemetry tracing on when the configuration's
// tracing.endpoint or the standard OTEL_* variables ask for it (package
// ferryotel, docs/tracing.md): each stream's consumers then get its hook.
// The provider is flushed and stopped after every stream stopped (the
// first closer, so the last to run).
func (d *daemon) setupTracing(ctx context.Context) error {
	s := ferryotel.Settings{Endpoint: d.cfg.Tracing.Endpoint, ServiceName: d.cfg.Tracing.ServiceName,
		ServiceVersion: moduleVersion()}
	on, why := s.Enabled()
	if !on {
		d.log.Debug("tracing off", "why", why)
		return nil
	}
	tr, shutdown, err := ferryotel.FromEnv(ctx, s)
	if err != nil {
		return fmt.Errorf("tracing: %w", err)
	}
	d.tracer = tr
	d.closers = append(d.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushBudget)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			d.log.Warn("tracing: the last spans were not all exported", "err", err)
		}
	})
	d.log.Info("tracing on", "endpoint", endpointHost(s.Endpoint))
	return nil
}

// endpointHost names where spans go without anything but scheme and host
// (an endpoint's path or query may hold what a log should not).
func endpointHost(configured string) string {
	for _, e := range []string{configured, os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")} {
		if e == "" {
			continue
		}
		if u, err := url.Parse(e); err == nil && u.Host != "" {
			return u.Scheme + "://" + u.Host
		}
		return "(unparsable)"
	}
	return ""
}

// moduleVersion is the binary's module version ("" when unknown or a
// development build), the service.version of its spans.
func moduleVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return ""
}
