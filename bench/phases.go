package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sort"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ehmirror/ehmirror/config"
	"github.com/ehmirror/ehmirror/eventhubs"
	"github.com/ehmirror/ehmirror/kafka"
	"github.com/ehmirror/ehmirror/mirror"
	"github.com/ehmirror/ehmirror/partitionkey"
)

// engineOptions are the engine options of the mirror phase, as the handler
// sets them by default (hash partitioning, 64 MiB in flight, 1 MiB fetches).
func engineOptions(logger *slog.Logger) mirror.Options {
	return mirror.Options{Partitioning: mirror.PartitionByHash, Logger: logger}
}

// allPartitions lists the benchmark's 20 Kafka partitions.
func allPartitions() []mirror.TopicPartition {
	tps := make([]mirror.TopicPartition, 0, NumTopics*NumPartitions)
	for ti := range NumTopics {
		for p := range NumPartitions {
			tps = append(tps, mirror.TopicPartition{Topic: TopicName(ti), Partition: int32(p)})
		}
	}
	return tps
}

func newSource(spec ChildSpec, group string, logger *slog.Logger) (*kafka.Source, error) {
	// The handler's session (KAFKA_SESSION_TIMEOUT's default), not the
	// kafka package's broker minimum: with 6 s, a calibration drain of a
	// fresh 1 GB backlog ended "group rebalanced".
	opts := kafka.Options{Brokers: spec.Brokers, Group: group, Logger: logger, SessionTimeout: config.DefaultKafkaSessionTimeout}
	if spec.CAFile != "" {
		// The CA is in SSL_CERT_FILE, which the system roots read.
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	src, err := kafka.NewSource(opts)
	if err != nil {
		return nil, fmt.Errorf("kafka source: %w", err)
	}
	return src, nil
}

func newSink(spec ChildSpec, logger *slog.Logger) (*eventhubs.Sink, error) {
	sink, err := eventhubs.NewSink(eventhubs.Options{ConnectionString: spec.ConnectionString, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("event hubs sink: %w", err)
	}
	return sink, nil
}

// readPhase reads every record with the adapter's Fetch and the engine's
// FetchBytes, one goroutine per partition as the engine's readers do.
func readPhase(ctx context.Context, spec ChildSpec, m *meter) error {
	read, closeSource, err := prepareRead(ctx, spec)
	if err != nil {
		return err
	}
	defer closeSource()
	return measureWork(ctx, spec, m, read)
}

// measureWork times w on m, within spec.Timeout, and records the records
// and bytes it handled.
func measureWork(ctx context.Context, spec ChildSpec, m *meter, w work) error {
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	if err := m.start(); err != nil {
		return err
	}
	n, b, werr := w(ctx)
	if err := errors.Join(werr, m.stop()); err != nil {
		return err
	}
	m.res.Records, m.res.Bytes = n, b
	return nil
}

// work is one limit's measured work: it returns the records and value
// bytes it handled, and fails when they are not every record of the spec.
type work func(ctx context.Context) (records, bytes int64, err error)

// prepareRead opens the Kafka source and reads the watermarks (which warms
// the connection), and returns the read limit's work and the source's
// close.
func prepareRead(ctx context.Context, spec ChildSpec) (work, func(), error) {
	logger := slog.New(slog.DiscardHandler)
	src, err := newSource(spec, "bench-read", logger)
	if err != nil {
		return nil, nil, err
	}
	closeSource := func() { _ = src.Close() }
	eng, err := mirror.New(src, nil, engineOptions(logger))
	if err != nil {
		closeSource()
		return nil, nil, fmt.Errorf("engine options: %w", err)
	}
	fetchBytes := eng.Options().FetchBytes
	tps := allPartitions()
	wms, err := src.Watermarks(ctx, tps) // also warms the connection
	if err != nil {
		closeSource()
		return nil, nil, fmt.Errorf("watermarks: %w", err)
	}
	read := func(ctx context.Context) (int64, int64, error) {
		var records, bytes atomic.Int64
		g, gctx := errgroup.WithContext(ctx)
		for _, tp := range tps {
			g.Go(func() error {
				off, end := wms[tp].Start, wms[tp].End
				for off < end {
					f, err := src.Fetch(gctx, tp, off, fetchBytes)
					if err != nil {
						return fmt.Errorf("fetch: %w", err)
					}
					var n int64
					for i := range f.Records {
						n += int64(len(f.Records[i].Value))
					}
					records.Add(int64(len(f.Records)))
					bytes.Add(n)
					if f.Next <= off {
						return fmt.Errorf("fetch of %s at %d made no progress", tp, off)
					}
					off = f.Next
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return records.Load(), bytes.Load(), err
		}
		if want := spec.PerPartition * int64(len(tps)); records.Load() != want {
			return records.Load(), bytes.Load(), fmt.Errorf("read %d records, want %d", records.Load(), want)
		}
		return records.Load(), bytes.Load(), nil
	}
	return read, closeSource, nil
}

// parallelPhase is the parallel limit: the read limit's and the send
// limit's work at the same time in one process, on independent data (the
// events sent are built from the generator, not from what is read), timed
// until both are done. It is what an engine that only overlapped reading
// and sending, with nothing between them, would reach on these CPUs.
func parallelPhase(ctx context.Context, spec ChildSpec, m *meter) error {
	read, closeSource, err := prepareRead(ctx, spec)
	if err != nil {
		return err
	}
	defer closeSource()
	send, cnt, closeSink, err := prepareSend(ctx, spec)
	if err != nil {
		return err
	}
	defer closeSink()
	both := func(ctx context.Context) (n, b int64, err error) {
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() (err error) {
			n, b, err = read(gctx)
			return err
		})
		g.Go(func() error {
			_, _, err := send(gctx)
			return err
		})
		return n, b, g.Wait()
	}
	if err := measureWork(ctx, spec, m, both); err != nil {
		return err
	}
	m.res.Counters = cnt.snapshot()
	return nil
}

// route is one hub partition's share of the records: their coordinates
// packed as partition<<48 | offset.
type route struct {
	topic       int
	partitionID string
	records     []uint64
}

// routes assigns every record to its hub partition the way the engine's
// hash partitioning does: a keyed record to the Event Hubs service's hash
// of its key, a keyless one to its Kafka partition mod the partition count.
func routes(g *gen, ti int, ids []string, perPartition int64) []*route {
	out := make([]*route, len(ids))
	for i, id := range ids {
		out[i] = &route{topic: ti, partitionID: id}
	}
	for p := range NumPartitions {
		for off := range perPartition {
			q := p % len(ids)
			if k := g.key(ti, p, off); k != nil {
				q = partitionkey.Partition(string(k), len(ids))
			}
			out[q].records = append(out[q].records, uint64(p)<<48|uint64(off))
		}
	}
	return out
}

// sendPhase sends the event of every record, built as the engine's
// senders build it (mirror.EventBuilder), through the project's sink in
// full batches, one sender per hub partition, with no Kafka involved.
func sendPhase(ctx context.Context, spec ChildSpec, m *meter) error {
	send, cnt, closeSink, err := prepareSend(ctx, spec)
	if err != nil {
		return err
	}
	defer closeSink()
	if err := measureWork(ctx, spec, m, send); err != nil {
		return err
	}
	m.res.Counters = cnt.snapshot()
	return nil
}

// prepareSend opens the sink, routes every record to its hub partition
// and opens every link, as a warm handler has them, and returns the send
// limit's work, the counters of its sink and the sink's close.
func prepareSend(ctx context.Context, spec ChildSpec) (work, *counters, func(), error) {
	logger := slog.New(slog.DiscardHandler)
	sink, err := newSink(spec, logger)
	if err != nil {
		return nil, nil, nil, err
	}
	closeSink := func() { _ = sink.Close(context.WithoutCancel(ctx)) }
	g := newGen(spec.Shape)
	var all []*route
	for ti := range NumTopics {
		hub, err := sink.Hub(ctx, TopicName(ti))
		if err != nil {
			closeSink()
			return nil, nil, nil, fmt.Errorf("hub: %w", err)
		}
		rs := routes(g, ti, hub.PartitionIDs, spec.PerPartition)
		for _, r := range rs {
			// Open the link now, as a warm handler has it open.
			if _, err := sink.NewBatch(ctx, TopicName(ti), r.partitionID); err != nil {
				closeSink()
				return nil, nil, nil, fmt.Errorf("warming the link: %w", err)
			}
		}
		all = append(all, rs...)
	}
	cnt := &counters{}
	counted := countingSink{Sink: sink, c: cnt}
	send := func(ctx context.Context) (int64, int64, error) {
		var records, bytes atomic.Int64
		eg, gctx := errgroup.WithContext(ctx)
		for _, r := range all {
			eg.Go(func() error {
				n, b, err := sendRoute(gctx, counted, g, r)
				records.Add(n)
				bytes.Add(b)
				return err
			})
		}
		if err := eg.Wait(); err != nil {
			return records.Load(), bytes.Load(), err
		}
		if want := spec.PerPartition * NumTopics * NumPartitions; records.Load() != want {
			return records.Load(), bytes.Load(), fmt.Errorf("sent %d records, want %d", records.Load(), want)
		}
		return records.Load(), bytes.Load(), nil
	}
	return send, cnt, closeSink, nil
}

// sendRoute sends one hub partition's events, one full batch at a time.
func sendRoute(ctx context.Context, sink mirror.Sink, g *gen, r *route) (records, bytes int64, err error) {
	hub := TopicName(r.topic)
	var events mirror.EventBuilder
	var rh reusedHeaders
	i := 0
	for i < len(r.records) {
		b, err := sink.NewBatch(ctx, hub, r.partitionID)
		if err != nil {
			return records, bytes, fmt.Errorf("new batch: %w", err)
		}
		var n, nb int64
		for i < len(r.records) {
			c := r.records[i]
			rec := g.recordReusing(&rh, r.topic, int(c>>48), int64(c&(1<<48-1)))
			if err := b.Add(events.Build(&rec)); err != nil {
				if errors.Is(err, mirror.ErrBatchFull) {
					break
				}
				return records, bytes, fmt.Errorf("adding an event: %w", err)
			}
			n++
			nb += int64(len(rec.Value))
			i++
		}
		if err := sink.Send(ctx, b); err != nil {
			return records, bytes, fmt.Errorf("send: %w", err)
		}
		records += n
		bytes += nb
	}
	return records, bytes, nil
}

// mirrorPhase drains every record through the engine with a fresh consumer
// group, on a process whose Kafka connection and Event Hubs links are open,
// then times drains that find nothing to do.
func mirrorPhase(ctx context.Context, spec ChildSpec, m *meter, logger *slog.Logger) error {
	// The handler sets the garbage collector's memory limit from the
	// in-flight bound; the read and send limits keep Go's defaults.
	if limit, ok := config.MemoryLimit(os.Getenv, config.DefaultInFlightBytes, config.AvailableMemory()); ok {
		debug.SetMemoryLimit(limit)
	}
	quiet := slog.New(slog.DiscardHandler)
	src, err := newSource(spec, spec.Group, quiet)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	sink, err := newSink(spec, quiet)
	if err != nil {
		return err
	}
	defer func() { _ = sink.Close(context.WithoutCancel(ctx)) }()
	var cnt counters
	opts := engineOptions(logger)
	var engSink mirror.Sink = countingSink{Sink: sink, c: &cnt}
	if spec.Deduplicate {
		// The counter must not hide the sink's reader.
		opts.Deduplicate = true
		engSink = readingSink{countingSink: countingSink{Sink: sink, c: &cnt}, HubReader: sink}
	}
	eng, err := mirror.New(countingSource{Source: src, c: &cnt}, engSink, opts)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	// Warm the process as an earlier invocation would have: topic
	// listing, watermarks, hub properties and one link per hub partition.
	if _, err := src.Topics(ctx); err != nil {
		return fmt.Errorf("warming kafka: %w", err)
	}
	if _, err := src.Watermarks(ctx, allPartitions()); err != nil {
		return fmt.Errorf("warming kafka: %w", err)
	}
	for ti := range NumTopics {
		hub, err := sink.Hub(ctx, TopicName(ti))
		if err != nil {
			return fmt.Errorf("warming event hubs: %w", err)
		}
		for _, id := range hub.PartitionIDs {
			if _, err := sink.NewBatch(ctx, hub.Name, id); err != nil {
				return fmt.Errorf("warming event hubs: %w", err)
			}
		}
	}
	lim := mirror.Limits{MaxDuration: spec.Timeout}
	if err := m.start(); err != nil {
		return err
	}
	rep, derr := eng.Drain(ctx, "bench", lim)
	if err := errors.Join(derr, m.stop()); err != nil {
		return err
	}
	m.res.Counters = cnt.snapshot()
	m.res.Records, m.res.Bytes = rep.Records, rep.Bytes
	m.res.Note = "stopped: " + rep.Stopped
	m.res.ReadTime = &rep.ReadTime
	want := spec.PerPartition * NumTopics * NumPartitions
	if rep.Records != want || rep.Stopped != mirror.StopCaughtUp || rep.Failed() || len(rep.Errors) > 0 || rep.LagAfter != 0 {
		return fmt.Errorf("drain mirrored %d of %d records, stopped %q, lag after %d, errors %v", rep.Records, want, rep.Stopped, rep.LagAfter, rep.Errors)
	}
	for range spec.IdleDrains {
		t0 := time.Now()
		rep, err := eng.Drain(ctx, "bench-idle", lim)
		d := time.Since(t0)
		if err != nil {
			return fmt.Errorf("idle drain: %w", err)
		}
		if rep.Records != 0 || len(rep.Errors) > 0 {
			return fmt.Errorf("idle drain mirrored %d records, errors %v", rep.Records, rep.Errors)
		}
		m.res.IdleDrainsMs = append(m.res.IdleDrainsMs, float64(d.Microseconds())/1000)
	}
	return nil
}

// median returns the median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
