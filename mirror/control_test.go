package mirror

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// fakeControl keeps control records in memory.
type fakeControl struct {
	records map[string]string
	writes  int
}

func (f *fakeControl) OffsetsForTime(context.Context, []TopicPartition, time.Time) (map[TopicPartition]int64, error) {
	return nil, nil
}
func (f *fakeControl) OtherMembers(context.Context) (int, error) { return 0, nil }
func (f *fakeControl) ControlRecords(_ context.Context, slot string, topics []string) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range topics {
		if r, ok := f.records[slot+"/"+t]; ok {
			out[t] = r
		}
	}
	return out, nil
}
func (f *fakeControl) WriteControlRecord(_ context.Context, slot, topic, record string) error {
	f.records[slot+"/"+topic] = record
	f.writes++
	return nil
}

// TestPauseRecordsRefreshed: paused topics are left out of a drain, and
// their records are copied (unchanged) into the kept slot at most once an
// hour so that Kafka's offset retention never ends a pause; the decision
// slot is never written by a drain, and a newer decision wins over an
// older kept copy (issue 22, defect 10).
func TestPauseRecordsRefreshed(t *testing.T) {
	fc := &fakeControl{records: map[string]string{
		"control/a":      `{"v":1,"paused":true,"by":"ann","at":"2026-01-01T00:00:00Z"}`,
		"control/b":      `{"v":1,"paused":false,"at":"2026-01-01T00:00:00Z"}`,
		"control/c":      `not ours`,
		"control/d":      `{"v":1,"paused":false,"by":"bob","at":"2026-02-01T00:00:00Z"}`,
		"control.kept/d": `{"v":1,"paused":true,"by":"ann","at":"2026-01-01T00:00:00Z"}`,
	}}
	m := &Mirror{opts: Options{Control: fc, Logger: slog.Default(), PauseRefresh: time.Hour}}
	topics := []Topic{{Name: "a", Partitions: 1}, {Name: "b", Partitions: 1}, {Name: "c", Partitions: 1}, {Name: "d", Partitions: 1}}
	kept, paused, since, err := m.dropPaused(context.Background(), topics)
	if err != nil || len(kept) != 3 || strings.Join(paused, ",") != "a" || !since.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("kept %v paused %v since %v err %v", kept, paused, since, err)
	}
	if fc.writes != 2 || !strings.Contains(fc.records["control.kept/a"], `"by":"ann","at":"2026-01-01T00:00:00Z"`) {
		t.Fatalf("pause record not refreshed unchanged: %d writes, %v", fc.writes, fc.records)
	}
	if !strings.Contains(fc.records["control.kept/d"], `"paused":false,"by":"bob"`) {
		t.Fatalf("an older kept pause was not replaced by the newer resume: %s", fc.records["control.kept/d"])
	}
	if fc.records["control/a"] != `{"v":1,"paused":true,"by":"ann","at":"2026-01-01T00:00:00Z"}` {
		t.Fatalf("a drain wrote the decision slot: %s", fc.records["control/a"])
	}
	if _, _, _, err := m.dropPaused(context.Background(), topics); err != nil || fc.writes != 2 {
		t.Fatalf("refreshed again within the hour: %d writes", fc.writes)
	}
}
