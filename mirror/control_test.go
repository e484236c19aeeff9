package mirror

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
func (f *fakeControl) CommittedMetadata(context.Context, []TopicPartition) (map[TopicPartition]CommitOffset, error) {
	return nil, nil
}
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

// barrierControl is a fakeControl whose ControlRecords calls each wait,
// up to a limit, until want of them are under way at once.
type barrierControl struct {
	*fakeControl
	want    int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

func (b *barrierControl) ControlRecords(ctx context.Context, slot string, topics []string) (map[string]string, error) {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.want {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-time.After(5 * time.Second):
		return nil, fmt.Errorf("slot %s read alone: the other slot was not read at the same time", slot)
	}
	return b.fakeControl.ControlRecords(ctx, slot, topics)
}

// The two control slots are read at once (one round trip before a drain's
// claim, not two), and their records combine as before: a newer decision
// wins over an older kept copy.
func TestPauseSlotsReadAtOnce(t *testing.T) {
	fc := &fakeControl{records: map[string]string{
		"control/a":      `{"v":1,"paused":true,"by":"ann","at":"2026-01-01T00:00:00Z"}`,
		"control/d":      `{"v":1,"paused":false,"by":"bob","at":"2026-02-01T00:00:00Z"}`,
		"control.kept/d": `{"v":1,"paused":true,"by":"ann","at":"2026-01-01T00:00:00Z"}`,
		"control.kept/e": `{"v":1,"paused":true,"by":"eve","at":"2026-03-01T00:00:00Z"}`,
	}}
	bc := &barrierControl{fakeControl: fc, want: 2, all: make(chan struct{})}
	m := &Mirror{opts: Options{Control: bc, Logger: slog.Default(), PauseRefresh: time.Hour}}
	got, err := m.Pauses(context.Background(), []string{"a", "d", "e"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["a"].By != "ann" || got["e"].By != "eve" {
		t.Fatalf("pauses %v, want a (decision) and e (kept copy); d resumed", got)
	}
}
