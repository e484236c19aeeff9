// Package metrics exports the mirror's figures as OpenTelemetry metrics:
// per partition lag and backlog age (the last known lag, with its age,
// when Kafka cannot be read), whether the status is up and ok, the
// problems known by kind, records and bytes mirrored, the end-to-end
// latency histogram, drain duration against budget, errors by kind, gaps
// and oversized records. They go to an OTLP collector when the
// standard OTEL_EXPORTER_OTLP_* variables name one (http/protobuf), and
// are readable as Prometheus text (GET /api/metrics). Nothing is pushed
// anywhere when OTLP is not configured.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/ehmirror/ehmirror/mirror"
)

// lagMaxAge is how long a lag reading serves the gauges: a scrape and an
// OTLP export in quick succession read Kafka once.
const lagMaxAge = 10 * time.Second

// lagTimeout bounds the lag read behind the gauges.
const lagTimeout = 8 * time.Second

// Metrics is the mirror's meter provider with its readers.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	registry *prometheus.Registry
	// OTLP is true when metrics are also pushed to an OTLP collector.
	OTLP bool

	svc *mirror.Service

	latency, duration, budgetUsed metric.Float64Histogram
	errs, gaps, oversized         metric.Int64Counter

	mu      sync.Mutex
	read    func(context.Context) Reading
	reading *Reading
	readAt  time.Time
}

// Reading is what the gauges export besides the drains' counters: the
// health with every known problem, and the lag as last known.
type Reading struct {
	Health mirror.Health
	// Lag is the last lag known (nil when never read); Current says it was
	// read just now (Kafka answered).
	Lag     *mirror.LagReport
	Current bool
}

// ReadWith sets how the gauges read the status (the handler's, with the
// readiness and other instances' problems). Without it they read the
// service's health and the lag.
func (m *Metrics) ReadWith(read func(context.Context) Reading) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read = read
}

// problemKinds are the kinds ehmirror_problems always exports, 0 when
// none is known, so that an alert on one never sees its series vanish.
var problemKinds = []string{mirror.KindEventHubs, mirror.KindKafka, mirror.KindUnauthorized, mirror.KindHubMissing, mirror.KindThrottled,
	mirror.KindOversized, mirror.KindGap, mirror.KindRecreated, mirror.KindStalled, mirror.KindCertificate, mirror.KindBehind,
	mirror.KindPausedLong, mirror.KindError}

// OTLPConfigured reports whether getenv configures an OTLP metrics
// exporter: an endpoint is set and OTEL_METRICS_EXPORTER is not "none".
func OTLPConfigured(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_METRICS_EXPORTER")), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != ""
}

// New makes the metrics of svc. With OTLP configured (see OTLPConfigured)
// they are pushed every OTEL_METRIC_EXPORT_INTERVAL (60 s by default) over
// http/protobuf; OTEL_EXPORTER_OTLP_PROTOCOL=grpc is refused.
func New(ctx context.Context, svc *mirror.Service, getenv func(string) string) (*Metrics, error) {
	m := &Metrics{registry: prometheus.NewRegistry(), svc: svc}
	prom, err := otelprom.New(otelprom.WithRegisterer(m.registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
	}
	opts := []sdkmetric.Option{sdkmetric.WithReader(prom)}
	if OTLPConfigured(getenv) {
		proto := getenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")
		if proto == "" {
			proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
		}
		if proto != "" && proto != "http/protobuf" {
			return nil, fmt.Errorf("metrics: OTEL_EXPORTER_OTLP_PROTOCOL %q: only http/protobuf is supported", proto)
		}
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("metrics: OTLP exporter: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
		m.OTLP = true
	}
	m.provider = sdkmetric.NewMeterProvider(opts...)
	if err := m.instruments(); err != nil {
		_ = m.provider.Shutdown(ctx)
		return nil, err
	}
	svc.Observe(m.observe)
	return m, nil
}

// instruments creates the instruments and the gauges' callback.
func (m *Metrics) instruments() error {
	meter := m.provider.Meter("github.com/ehmirror/ehmirror")
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	m.latency, err = meter.Float64Histogram("ehmirror.latency", metric.WithUnit("s"),
		metric.WithDescription("end-to-end latency of each record mirrored: Event Hubs' acknowledgement minus its Kafka timestamp"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600))
	add(err)
	m.duration, err = meter.Float64Histogram("ehmirror.drain.duration", metric.WithUnit("s"), metric.WithDescription("duration of a drain"),
		metric.WithExplicitBucketBoundaries(0.1, 0.5, 1, 5, 10, 30, 60, 120, 240, 600))
	add(err)
	m.budgetUsed, err = meter.Float64Histogram("ehmirror.drain.budget_used", metric.WithUnit("1"),
		metric.WithDescription("a drain's duration divided by its budget (MIRROR_MAX_DURATION)"),
		metric.WithExplicitBucketBoundaries(0.1, 0.25, 0.5, 0.75, 0.9, 1, 1.1))
	add(err)
	m.errs, err = meter.Int64Counter("ehmirror.errors", metric.WithDescription("errors of drains by kind (partition, hub, outage and drain errors)"))
	add(err)
	m.gaps, err = meter.Int64Counter("ehmirror.gap_records", metric.WithDescription("records removed by Kafka retention before they were mirrored"))
	add(err)
	m.oversized, err = meter.Int64Counter("ehmirror.oversized_records", metric.WithDescription("oversized records skipped (MIRROR_OVERSIZE_POLICY=skip)"))
	add(err)
	lag, err := meter.Int64ObservableGauge("ehmirror.lag", metric.WithDescription("records not yet mirrored, per partition"))
	add(err)
	age, err := meter.Float64ObservableGauge("ehmirror.backlog_age", metric.WithUnit("s"), metric.WithDescription("age of the oldest record not yet mirrored, per partition"))
	add(err)
	delivered, err := meter.Float64ObservableGauge("ehmirror.last_delivered", metric.WithUnit("s"),
		metric.WithDescription("when Event Hubs last acknowledged one of the partition's records in this process, as Unix time; absent before the first"))
	add(err)
	records, err := meter.Int64ObservableCounter("ehmirror.records", metric.WithDescription("records mirrored (acknowledged by Event Hubs) by this process"))
	add(err)
	bytes, err := meter.Int64ObservableCounter("ehmirror.bytes", metric.WithUnit("By"), metric.WithDescription("value bytes mirrored by this process"))
	add(err)
	up, err := meter.Int64ObservableGauge("ehmirror.up", metric.WithDescription("1 when Kafka answered the last lag read (the lag gauges are current), 0 when they show the last lag known"))
	add(err)
	ok, err := meter.Int64ObservableGauge("ehmirror.ok", metric.WithDescription("1 when no problem is known (the status's ok), 0 otherwise"))
	add(err)
	problems, err := meter.Int64ObservableGauge("ehmirror.problems", metric.WithDescription("problems known now, by kind (every kind is exported, 0 when none)"))
	add(err)
	lagAge, err := meter.Float64ObservableGauge("ehmirror.lag_age", metric.WithUnit("s"), metric.WithDescription("age of the lag reading behind ehmirror_lag: grows while Kafka cannot be read"))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("metrics: instruments: %w", err)
	}
	_, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		tp := m.svc.Mirror().Throughput()
		o.ObserveInt64(records, tp.TotalRecords)
		o.ObserveInt64(bytes, tp.TotalBytes)
		r := m.current(ctx)
		o.ObserveInt64(up, boolInt(r.Current))
		o.ObserveInt64(ok, boolInt(r.Current && r.Health.OK))
		byKind := map[string]int64{}
		for _, p := range r.Health.Problems {
			byKind[p.Kind]++
		}
		for _, kind := range problemKinds {
			o.ObserveInt64(problems, byKind[kind], metric.WithAttributes(attribute.String("kind", kind)))
		}
		rep := r.Lag
		if rep == nil {
			return nil
		}
		o.ObserveFloat64(lagAge, max(time.Since(rep.Time), 0).Seconds())
		for _, p := range rep.Partitions {
			attrs := metric.WithAttributes(attribute.String("topic", p.Topic), attribute.Int("partition", int(p.Partition)),
				attribute.String("hub", p.Hub), attribute.Bool("paused", p.Paused))
			o.ObserveInt64(lag, p.Lag, attrs)
			o.ObserveFloat64(age, p.BehindBy.Seconds(), attrs)
			if !p.LastDelivered.IsZero() {
				o.ObserveFloat64(delivered, float64(p.LastDelivered.UnixMilli())/1000, attrs)
			}
		}
		return nil
	}, lag, age, delivered, records, bytes, up, ok, problems, lagAge)
	if err != nil {
		return fmt.Errorf("metrics: callback: %w", err)
	}
	return nil
}

// current returns a reading at most lagMaxAge old: a scrape and an OTLP
// export in quick succession read Kafka once. When Kafka cannot be read
// the lag is the last known, so the lag series stay (with ehmirror_up 0
// and the reading's age in ehmirror_lag_age_seconds).
func (m *Metrics) current(ctx context.Context) Reading {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reading != nil && time.Since(m.readAt) < lagMaxAge {
		return *m.reading
	}
	ctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	var r Reading
	if m.read != nil {
		r = m.read(ctx)
	} else {
		lag, err := m.svc.Mirror().Lag(ctx, nil)
		r = Reading{Health: m.svc.Health(lag), Lag: lag, Current: err == nil}
		if err != nil {
			r.Lag = m.svc.Mirror().LastLag()
		}
	}
	m.reading, m.readAt = &r, time.Now()
	return r
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// observe records a drain's report.
func (m *Metrics) observe(rep *mirror.Report) {
	ctx := context.Background()
	trigger := metric.WithAttributes(attribute.String("trigger", rep.Trigger))
	m.duration.Record(ctx, rep.Duration.Seconds(), metric.WithAttributes(attribute.String("trigger", rep.Trigger), attribute.String("stopped", rep.Stopped)))
	if rep.Budget > 0 {
		m.budgetUsed.Record(ctx, float64(rep.Duration)/float64(rep.Budget), trigger)
	}
	if l := rep.Latency; l != nil {
		for _, b := range l.Buckets {
			for range b.Count {
				m.latency.Record(ctx, b.Upper.Seconds(), trigger)
			}
		}
	}
	kinds := map[string]int64{}
	hubErr := map[string]bool{}
	for _, he := range rep.HubErrors {
		kinds[he.Kind]++
		hubErr[fmt.Sprintf("topic %q -> event hub %q: %s", he.Topic, he.Hub, he.Error)] = true
	}
	for _, e := range rep.Errors {
		if !hubErr[e] {
			kinds["drain"]++
		}
	}
	for _, o := range rep.Outages {
		kinds["outage "+o.Kind]++
	}
	var gap int64
	for _, p := range rep.Partitions {
		if p.Error != "" {
			kinds[p.Kind]++
		}
		gap += p.Gap
	}
	for kind, n := range kinds {
		m.errs.Add(ctx, n, metric.WithAttributes(attribute.String("kind", kind), attribute.String("trigger", rep.Trigger)))
	}
	if gap > 0 {
		m.gaps.Add(ctx, gap, trigger)
	}
	if rep.Skipped > 0 {
		m.oversized.Add(ctx, rep.Skipped, trigger)
	}
}

// WritePrometheus writes every metric in the Prometheus text format
// (version 0.0.4).
func (m *Metrics) WritePrometheus(w io.Writer) error {
	mfs, err := m.registry.Gather()
	if err != nil {
		return fmt.Errorf("metrics: gathering: %w", err)
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return fmt.Errorf("metrics: encoding %s: %w", mf.GetName(), err)
		}
	}
	return nil
}

// PrometheusContentType is the content type of WritePrometheus's output.
const PrometheusContentType = "text/plain; version=0.0.4; charset=utf-8"

// ForceFlush pushes what was recorded to the OTLP collector now.
func (m *Metrics) ForceFlush(ctx context.Context) error {
	if err := m.provider.ForceFlush(ctx); err != nil {
		return fmt.Errorf("metrics: flush: %w", err)
	}
	return nil
}

// Shutdown flushes and stops the exporters.
func (m *Metrics) Shutdown(ctx context.Context) error {
	if err := m.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("metrics: shutdown: %w", err)
	}
	return nil
}
