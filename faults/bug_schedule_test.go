package faults

import (
	"context"
	"net/http"
	"testing"

	"github.com/ehmirror/ehmirror/config"
)

// BUG (found by scenario 8; fixed by the lead in 767d969 "config:
// MIRROR_SCHEDULE is required"; kept as a regression test): a missing or
// empty MIRROR_SCHEDULE was not reported, although it stops the mirror.
// MirrorTimer/function.json binds its schedule to %MIRROR_SCHEDULE%, which
// the Functions host resolves from the app settings when it indexes the
// functions: unset (or empty, which is no valid NCRONTAB) is an indexing
// error, MirrorTimer is never scheduled and nothing is ever mirrored.
// config.Load, however, fell back to the README's "default"
// (0 */1 * * * *) without a problem, so GET /api/status answered 200 with
// "ok": true and no problem (its config even showed the default schedule)
// while the lag only grew.
//
// Repro: start the handler with every setting valid except MIRROR_SCHEDULE
// removed (or set to ""), call /api/status with records waiting.
func TestBugScheduleMissingReportedHealthy(t *testing.T) {
	for _, c := range []struct {
		name  string
		value string
	}{{"missing", unset}, {"empty", ""}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, envConfig{Topics: []string{"prod.f1"}, Partitions: 1, HubPartitions: 1})
			ctx := context.Background()
			settings := e.handlerSettings(nil)
			if c.value == unset {
				delete(settings, config.MirrorSchedule)
			} else {
				settings[config.MirrorSchedule] = c.value
			}
			h := startHandler(t, "schedule-"+c.name, settings)
			h.e = e
			e.newProducer(producerConfig{}).produce(ctx, 100)

			if h.host.FunctionErrors()[timerFunction] == nil {
				t.Fatalf("the host indexed MirrorTimer without a schedule: the premise of this test does not hold")
			}
			if _, ok := h.host.Schedule(timerFunction); ok {
				t.Fatalf("the host scheduled MirrorTimer")
			}
			t.Logf("the host will never run MirrorTimer: %v", h.host.FunctionErrors()[timerFunction])

			code, st, err := h.status(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			named := false
			for _, p := range st.Problems {
				named = named || p.Setting == config.MirrorSchedule
			}
			if !named {
				t.Errorf("MIRROR_SCHEDULE %s: the timer can never run, yet /api/status answers %d ok=%t with problems %v, config schedule %q, lag %d",
					c.name, code, st.OK, st.Problems, st.Config[config.MirrorSchedule], lagTotal(st))
			}
			if code == http.StatusOK && st.OK {
				t.Errorf("MIRROR_SCHEDULE %s: /api/status reports a healthy mirror that will never run", c.name)
			}
		})
	}
}

func lagTotal(st statusView) int64 {
	if st.Lag == nil {
		return -1
	}
	return st.Lag.Total
}
