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
func (f *fakeControl) GroupMembers(context.Context) (int, error) { return 0, nil }
func (f *fakeControl) ControlRecords(_ context.Context, topics []string) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range topics {
		if r, ok := f.records[t]; ok {
			out[t] = r
		}
	}
	return out, nil
}
func (f *fakeControl) WriteControlRecord(_ context.Context, topic, record string) error {
	f.records[topic] = record
	f.writes++
	return nil
}

// TestPauseRecordsRefreshed: paused topics are left out of a drain, and
// their records are re-written (unchanged) at most once an hour so that
// Kafka's offset retention never ends a pause.
func TestPauseRecordsRefreshed(t *testing.T) {
	fc := &fakeControl{records: map[string]string{
		"a": `{"v":1,"paused":true,"by":"ann","at":"2026-01-01T00:00:00Z"}`,
		"b": `{"v":1,"paused":false,"at":"2026-01-01T00:00:00Z"}`,
		"c": `not ours`,
	}}
	m := &Mirror{opts: Options{Control: fc, Logger: slog.Default()}}
	topics := []Topic{{Name: "a", Partitions: 1}, {Name: "b", Partitions: 1}, {Name: "c", Partitions: 1}}
	kept, paused, err := m.dropPaused(context.Background(), topics)
	if err != nil || len(kept) != 2 || strings.Join(paused, ",") != "a" {
		t.Fatalf("kept %v paused %v err %v", kept, paused, err)
	}
	if fc.writes != 1 || !strings.Contains(fc.records["a"], `"by":"ann","at":"2026-01-01T00:00:00Z"`) {
		t.Fatalf("pause record not refreshed unchanged: %d writes, %s", fc.writes, fc.records["a"])
	}
	if _, _, err := m.dropPaused(context.Background(), topics); err != nil || fc.writes != 1 {
		t.Fatalf("refreshed again within the hour: %d writes", fc.writes)
	}
}
