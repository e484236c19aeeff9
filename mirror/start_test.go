package mirror_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/emulator"
	"github.com/ehmirror/ehmirror/mirror"
)

// addPartitions grows topic to n partitions.
func (e *env) addPartitions(topic string, n int32) {
	e.t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, n
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := req.RequestWith(ctx, e.client)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, t := range res.Topics {
		if t.ErrorCode != 0 {
			e.t.Fatalf("create partitions %s: error %d", t.Topic, t.ErrorCode)
		}
	}
}

// TestLatestOnlyForTheFirstDeployment (issue 11, finding 4):
// KAFKA_START_OFFSET=latest skips what was there before the group's first
// drain, but a partition added later and a topic created later start at
// their earliest offset: records produced before a drain saw them are
// mirrored.
func TestLatestOnlyForTheFirstDeployment(t *testing.T) {
	e := newEnv(t, emulator.HubConfig{Name: "prod.test6", PartitionCount: 2})
	for i := range 5 {
		e.produce(&kgo.Record{Topic: "prod.test1", Partition: 0, Value: fmt.Appendf(nil, "before%d", i)})
	}
	m := e.newMirror(mirror.Options{StartOffset: mirror.StartLatest})
	if rep := e.drain(m, mirror.Limits{}); rep.Records != 0 {
		t.Fatalf("first deployment under latest mirrored %d records", rep.Records)
	}
	if c := e.committed(m, "prod.test1")[0]; c != 5 {
		t.Fatalf("first drain committed %d, want the end 5", c)
	}
	e.addPartitions("prod.test1", 6)
	if err := e.cluster.CreateTopic("prod.test6", 2, nil); err != nil {
		t.Fatal(err)
	}
	e.produceFresh(
		&kgo.Record{Topic: "prod.test1", Partition: 5, Value: []byte("new-partition-0")},
		&kgo.Record{Topic: "prod.test1", Partition: 5, Value: []byte("new-partition-1")},
		&kgo.Record{Topic: "prod.test6", Partition: 1, Value: []byte("new-topic-0")},
	)
	rep := e.drain(m, mirror.Limits{})
	var got []string
	for hub, n := range map[string]int{"prod.test1": 4, "prod.test6": 2} {
		for _, recs := range e.mirrored(hub, n) {
			for _, r := range recs {
				got = append(got, string(r.Value))
			}
		}
	}
	joined := strings.Join(got, ",")
	for _, want := range []string{"new-partition-0", "new-partition-1", "new-topic-0"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("%s was skipped under latest: mirrored %v; %v", want, got, rep.Lines())
		}
	}
	if strings.Contains(joined, "before") {
		t.Fatalf("records before the first deployment mirrored: %v", got)
	}
}

// TestResumeEarliestResetsABeyondEndCommit (finding 6): a committed offset
// past the log end is replaced under resume-earliest, so the next drain does
// not send the partition again; lag flags such an offset instead of showing
// 0.
func TestResumeEarliestResetsABeyondEndCommit(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test2"
	for i := range 30 {
		e.produce(&kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, "v%d", i)})
	}
	m := e.newMirror(mirror.Options{GapPolicy: mirror.GapResumeEarliest})
	e.commitAs(e.newSource(), topic, 1, 500, "")
	lag, err := m.Lag(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range lag.Partitions {
		if p.Topic == topic && p.Partition == 1 && (!p.BeyondEnd || p.Lag != 30) {
			t.Fatalf("lag of a committed offset beyond the end: %+v", p)
		}
	}
	rep := e.drain(m, mirror.Limits{})
	if p := findPartition(t, rep, topic, 1); p.Records != 30 || p.Committed != 30 || p.LagAfter != 0 {
		t.Fatalf("first drain: %+v", p)
	}
	rep = e.drain(m, mirror.Limits{})
	if p := findPartition(t, rep, topic, 1); p.Records != 0 || p.Committed != 30 {
		t.Fatalf("second drain sent the partition again: %+v", p)
	}
	if n := len(e.tally(topic, 4)); n != 30 {
		t.Fatalf("%d distinct records mirrored, want 30", n)
	}
}
