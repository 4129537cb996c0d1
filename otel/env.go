package ferryotel

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ErrConfig is matched (errors.Is) by FromEnv's errors for a setting it
// cannot use.
var ErrConfig = errors.New("ferryotel: bad tracing configuration")

// Settings are what FromEnv takes besides the environment.
type Settings struct {
	// Endpoint is an OTLP/HTTP base URL ("http://collector:4318"), as
	// OTEL_EXPORTER_OTLP_ENDPOINT: traces go to <Endpoint>/v1/traces.
	// Set, it turns tracing on and overrides the variables' endpoint.
	Endpoint string
	// ServiceName is the service.name resource attribute unless
	// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) sets one; default
	// "ferry".
	ServiceName string
	// ServiceVersion is the service.version resource attribute ("": none).
	ServiceVersion string
	// Getenv reads the environment (default os.Getenv); tests replace it.
	Getenv func(string) string
}

// Enabled reports whether the environment (or s.Endpoint) turns tracing
// on, and why not when it does not.
func (s Settings) Enabled() (bool, string) {
	get := s.getenv()
	switch {
	case strings.EqualFold(strings.TrimSpace(get("OTEL_SDK_DISABLED")), "true"):
		return false, "OTEL_SDK_DISABLED=true"
	case strings.EqualFold(strings.TrimSpace(get("OTEL_TRACES_EXPORTER")), "none"):
		return false, "OTEL_TRACES_EXPORTER=none"
	case s.Endpoint != "", get("OTEL_EXPORTER_OTLP_ENDPOINT") != "", get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
		return true, ""
	}
	return false, "no OTLP endpoint: set OTEL_EXPORTER_OTLP_ENDPOINT (or tracing.endpoint)"
}

func (s Settings) getenv() func(string) string {
	if s.Getenv != nil {
		return s.Getenv
	}
	return os.Getenv
}

// FromEnv returns a Tracer exporting over OTLP/HTTP as the standard
// OTEL_* variables (and s) say, and the function that flushes and stops
// its provider; it returns a nil Tracer and a no-op shutdown when tracing
// is off (Enabled). It does not connect: spans are exported in batches in
// the background, and an unreachable collector costs dropped spans, never
// a delivery.
func FromEnv(ctx context.Context, s Settings) (*Tracer, func(context.Context) error, error) {
	noop := func(context.Context) error { return nil }
	if on, _ := s.Enabled(); !on {
		return nil, noop, nil
	}
	get := s.getenv()
	if e := strings.TrimSpace(get("OTEL_TRACES_EXPORTER")); e != "" && e != "otlp" {
		return nil, noop, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: ferry exports traces with otlp (or none)", ErrConfig, e)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(get(name)); p != "" {
			if p != "http/protobuf" {
				return nil, noop, fmt.Errorf("%w: %s=%q: ferry exports OTLP over http/protobuf (port 4318); point it at the collector's HTTP receiver", ErrConfig, name, p)
			}
			break
		}
	}
	var opts []otlptracehttp.Option
	if s.Endpoint != "" {
		if err := CheckEndpoint(s.Endpoint); err != nil {
			return nil, noop, err
		}
		u, _ := url.Parse(s.Endpoint)
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, noop, fmt.Errorf("%w: OTLP exporter: %v", ErrConfig, err)
	}
	name := s.ServiceName
	if name == "" {
		name = "ferry"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if s.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", s.ServiceVersion))
	}
	// The environment's resource attributes override the defaults.
	res, err := resource.Merge(resource.NewSchemaless(attrs...), envResource(get))
	if err != nil {
		return nil, noop, fmt.Errorf("%w: resource: %v", ErrConfig, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return New(TracerProvider(tp)), tp.Shutdown, nil
}

// envResource is OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, read
// with get.
func envResource(get func(string) string) *resource.Resource {
	var attrs []attribute.KeyValue
	for _, kv := range strings.Split(get("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		if dv, err := url.PathUnescape(strings.TrimSpace(v)); err == nil {
			v = dv
		}
		attrs = append(attrs, attribute.String(k, v))
	}
	if n := strings.TrimSpace(get("OTEL_SERVICE_NAME")); n != "" {
		attrs = append(attrs, attribute.String("service.name", n))
	}
	return resource.NewSchemaless(attrs...)
}

// CheckEndpoint checks an OTLP/HTTP base URL: http or https, a host, no
// user info (credentials go in OTEL_EXPORTER_OTLP_HEADERS), no query or
// fragment. Its error matches ErrConfig and never repeats the URL's
// user info.
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return fmt.Errorf("%w: endpoint: not a URL (want http://collector:4318)", ErrConfig)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: endpoint: the scheme must be http or https (OTLP/HTTP), got %q", ErrConfig, u.Scheme)
	case u.Host == "":
		return fmt.Errorf("%w: endpoint: a host is required (http://collector:4318)", ErrConfig)
	case u.User != nil:
		return fmt.Errorf("%w: endpoint: must not hold user info; put credentials in OTEL_EXPORTER_OTLP_HEADERS", ErrConfig)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%w: endpoint: must not have a query or fragment", ErrConfig)
	}
	return nil
}
