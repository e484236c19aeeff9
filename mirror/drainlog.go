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
// one line per drain error and per partition with work or errors, then the
// structured line msg=drain with the keys run, trigger (timer|catchup),
// records, bytes, lag (after the drain; -1 unknown), partitions, errors,
// gaps (partitions with records lost to retention), oversized (records
// skipped plus partitions stopped at an oversized record), duration_ms,
// budget_ms, stopped and throttled (sends refused with server-busy). The
// structured line is at level ERROR when records could not be mirrored,
// else INFO. startFailed says the drain could not start (its lag is then
// unknown).
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
			logger.Log(ctx, level, p.String(), "run", rep.Run, "trigger", trigger)
		}
	}
	lag := rep.LagAfter
	if startFailed || len(rep.HubErrors) > 0 || hasPrefixed(rep.Errors, "reading watermarks") {
		lag = -1
	}
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
	)
}

func hasPrefixed(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
