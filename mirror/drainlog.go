package mirror

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// DrainLogMessage is the msg of the one structured line logged per drain.
const DrainLogMessage = "drain"

// LogReport logs a drain the same way for every trigger (timer or catch-up):
// one line per drain error and per partition with work or errors (with
// the attributes topic, partition and hub), then the
// structured line msg=drain with the keys run, trigger (timer|catchup),
// records, bytes, lag (after the drain; -1 unknown), partitions, errors,
// gaps (partitions with records lost to retention), oversized (records
// skipped plus partitions stopped at an oversized record), duration_ms,
// budget_ms, stopped, throttled (sends refused with server-busy),
// backlog_age_ms (the age of the oldest record left unmirrored; 0 when none
// or unknown) and latency_p50_ms, latency_p99_ms (Event Hubs'
// acknowledgement minus the Kafka timestamp of the records mirrored; -1
// without records), paused_age_ms (how long the oldest pause of a paused
// topic had lasted; 0 when none), waited_kafka_pct, waited_inflight_pct and
// waited_senders_pct (the shares of the readers' time spent waiting for
// Kafka, for the in-flight bound and for the senders: Report.ReadTime; 0
// when nothing was read). The structured line is at level ERROR
// when records could not be mirrored, else INFO. startFailed says the drain could not
// start (its lag is then unknown).
func LogReport(ctx context.Context, logger *slog.Logger, rep *Report, trigger string, budget time.Duration, startFailed bool) {
	for _, e := range rep.Errors {
		logger.WarnContext(ctx, "drain error: "+strings.ReplaceAll(e, "\n", "; "), "run", rep.Run, "trigger", trigger)
	}
	var gaps, oversized int64 = 0, rep.Skipped
	for _, p := range rep.Partitions {
		if p.Gap > 0 || p.Kind == KindGap {
			gaps++
		}
		if p.Kind == KindOversized {
			oversized++
		}
		if p.Records > 0 || p.Error != "" || p.Gap > 0 || len(p.SkippedOffsets) > 0 || p.Busy || p.Note != "" {
			level := slog.LevelInfo
			if p.Error != "" {
				level = slog.LevelWarn
			}
			logger.Log(ctx, level, p.String(), "run", rep.Run, "trigger", trigger, "topic", p.Topic, "partition", p.Partition, "hub", p.Hub)
		}
	}
	for _, o := range rep.Outages {
		attrs := []any{"run", rep.Run, "trigger", trigger, "kind", o.Kind}
		if o.Hub != "" {
			attrs = append(attrs, "hub", o.Hub, "hub_partition", o.HubPartition)
		} else {
			attrs = append(attrs, "topic", o.Topic, "partition", o.Partition)
		}
		logger.WarnContext(ctx, "drain outage: "+o.describe(rep.Started.Add(rep.Duration)), attrs...)
	}
	rep.markLagUnknown(startFailed)
	lag := rep.LagAfter
	level := slog.LevelInfo
	if rep.Failed() {
		level = slog.LevelError
	}
	logger.Log(ctx, level, DrainLogMessage,
		"run", rep.Run,
		"trigger", trigger,
		"records", rep.Records,
		"bytes", rep.Bytes,
		"lag", lag,
		"partitions", len(rep.Partitions),
		"errors", rep.errorCount(),
		"gaps", gaps,
		"oversized", oversized,
		"duration_ms", rep.Duration.Milliseconds(),
		"budget_ms", budget.Milliseconds(),
		"stopped", rep.Stopped,
		"throttled", rep.Throttled,
		"backlog_age_ms", rep.BehindBy.Milliseconds(),
		"latency_p50_ms", latencyMillis(rep.Latency, false),
		"latency_p99_ms", latencyMillis(rep.Latency, true),
		"paused_age_ms", pausedAge(rep).Milliseconds(),
		"waited_kafka_pct", rep.ReadTime.share(rep.ReadTime.Kafka),
		"waited_inflight_pct", rep.ReadTime.share(rep.ReadTime.InFlight),
		"waited_senders_pct", rep.ReadTime.share(rep.ReadTime.Senders),
	)
}

// pausedAge is how long the oldest pause of the drain's paused topics had
// lasted when the drain started; 0 when none was paused.
func pausedAge(rep *Report) time.Duration {
	if rep.PausedSince.IsZero() {
		return 0
	}
	return max(rep.Started.Sub(rep.PausedSince), 0)
}

func hasPrefixed(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// latencyMillis is the p50 (or p99) of l in milliseconds, -1 for nil.
func latencyMillis(l *Latency, p99 bool) int64 {
	switch {
	case l == nil:
		return -1
	case p99:
		return l.P99.Milliseconds()
	}
	return l.P50.Milliseconds()
}
