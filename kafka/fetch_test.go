package kafka

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/mirror"
)

func TestFetchRecordsExactly(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addrs := c.ListenAddrs()
	s := newTestSource(t, addrs, "g-fetch")
	p := newProducer(t, addrs)
	ctx := ctxT(t, 10*time.Second)

	ts := time.UnixMilli(1_700_000_000_123)
	binary := []byte{0, 1, 2, 0xff, 0xfe, 0}
	in := []*kgo.Record{
		{Key: []byte("k1"), Value: []byte("v1"), Headers: []kgo.RecordHeader{
			{Key: "h", Value: []byte("a")}, {Key: "h", Value: []byte("b")}, {Key: "bin", Value: binary},
		}},
		{Key: nil, Value: []byte("no key")},
		{Key: []byte{}, Value: []byte("empty key")},
		{Key: []byte("tomb"), Value: nil},
		{Key: []byte("empty"), Value: []byte{}},
		{Key: []byte("hdr"), Value: []byte("x"), Headers: []kgo.RecordHeader{
			{Key: "nil", Value: nil}, {Key: "empty", Value: []byte{}}, {Key: "", Value: []byte("empty key")},
		}},
		{Key: binary, Value: binary},
	}
	for i, r := range in {
		r.Topic, r.Partition, r.Timestamp = "prod.test1", 1, ts.Add(time.Duration(i)*time.Second)
	}
	// One batch, so fetching from the middle exercises skipping the
	// batch's leading records.
	if err := p.ProduceSync(ctx, in...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tp := mirror.TopicPartition{Topic: "prod.test1", Partition: 1}
	f, err := s.Fetch(ctx, tp, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Records) != len(in) || f.Next != int64(len(in)) {
		t.Fatalf("got %d records, next %d; want %d", len(f.Records), f.Next, len(in))
	}
	if f.Watermarks != (mirror.Watermarks{Start: 0, End: int64(len(in))}) {
		t.Errorf("watermarks %+v", f.Watermarks)
	}
	for i, got := range f.Records {
		want := in[i]
		if got.Topic != tp.Topic || got.Partition != tp.Partition || got.Offset != int64(i) {
			t.Errorf("record %d: coordinates %s/%d@%d", i, got.Topic, got.Partition, got.Offset)
		}
		if !sameBytes(got.Key, want.Key) {
			t.Errorf("record %d: key %q (nil %t), want %q (nil %t)", i, got.Key, got.Key == nil, want.Key, want.Key == nil)
		}
		if !sameBytes(got.Value, want.Value) {
			t.Errorf("record %d: value %q (nil %t), want %q (nil %t)", i, got.Value, got.Value == nil, want.Value, want.Value == nil)
		}
		if !got.Time().Equal(want.Timestamp) {
			t.Errorf("record %d: time %v, want %v", i, got.Time(), want.Timestamp)
		}
		if len(got.Headers) != len(want.Headers) {
			t.Fatalf("record %d: %d headers, want %d", i, len(got.Headers), len(want.Headers))
		}
		for j, h := range got.Headers {
			w := want.Headers[j]
			if h.Key != w.Key || !bytes.Equal(h.Value, w.Value) {
				t.Errorf("record %d header %d: %q=%q, want %q=%q", i, j, h.Key, h.Value, w.Key, w.Value)
			}
			if (h.Value == nil) != (w.Value == nil) {
				t.Errorf("record %d header %q: got nil %t, want nil %t", i, h.Key, h.Value == nil, w.Value == nil)
			}
		}
	}

	// From the middle of the batch: earlier records are not returned.
	f, err = s.Fetch(ctx, tp, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Records) != len(in)-3 || f.Records[0].Offset != 3 || f.Records[0].Value != nil {
		t.Fatalf("fetch at 3: %d records, first %+v", len(f.Records), f.Records[0])
	}

	// At the end: nothing, Next unchanged, within FetchMaxWait.
	start := time.Now()
	f, err = s.Fetch(ctx, tp, int64(len(in)), 0)
	if err != nil || len(f.Records) != 0 || f.Next != int64(len(in)) {
		t.Fatalf("fetch at end: %v, %d records, next %d", err, len(f.Records), f.Next)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("empty fetch took %v", d)
	}
}

// sameBytes compares byte slices including nil versus empty.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func TestFetchSkipsAbortedAndMarkers(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addrs := c.ListenAddrs()
	s := newTestSource(t, addrs, "g-txn")
	ctx := ctxT(t, 15*time.Second)
	txn := newProducer(t, addrs, kgo.TransactionalID("txn-1"))
	plain := newProducer(t, addrs)
	tp := mirror.TopicPartition{Topic: "prod.test2", Partition: 0}
	rec := func(v string) *kgo.Record {
		return &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(v)}
	}
	runTxn := func(commit bool, vals ...string) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if err := txn.ProduceSync(ctx, rec(v)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	// plain a | txn commit b c | txn abort x y | plain d (interleaved
	// with an open aborted txn) | txn abort z | markers only at the end.
	if err := plain.ProduceSync(ctx, rec("a")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	runTxn(true, "b", "c")
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"x", "y"} {
		if err := txn.ProduceSync(ctx, rec(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := plain.ProduceSync(ctx, rec("d")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	runTxn(false, "z")

	wm, err := s.Watermarks(ctx, []mirror.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	end := wm[tp].End
	// a, b, c, commit marker, x, y, d, abort marker, z, abort marker
	if end != 10 {
		t.Fatalf("end %d, want 10", end)
	}
	readAll := func(maxBytes int) []string {
		t.Helper()
		var got []string
		next := int64(0)
		for fetches := 0; next < end; fetches++ {
			if fetches > 20 {
				t.Fatalf("no progress: next %d, end %d", next, end)
			}
			f, err := s.Fetch(ctx, tp, next, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range f.Records {
				got = append(got, string(r.Value))
			}
			if f.Next <= next {
				t.Fatalf("fetch at %d did not advance (next %d, end %d)", next, f.Next, end)
			}
			next = f.Next
		}
		if next != end {
			t.Fatalf("next %d, want end %d", next, end)
		}
		return got
	}
	want := []string{"a", "b", "c", "d"}
	if got := readAll(0); !slices.Equal(got, want) {
		t.Fatalf("read committed in one fetch: %v, want %v", got, want)
	}
	// A tiny maxBytes returns one batch per fetch: markers and aborted
	// batches alone still advance Next.
	if got := readAll(1); !slices.Equal(got, want) {
		t.Fatalf("read committed batch by batch: %v, want %v", got, want)
	}

	// An open transaction holds End (the LSO) back; its records are not
	// returned and fetching at the LSO does not spin.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, rec("open")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := plain.ProduceSync(ctx, rec("after-open")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	f, err := s.Fetch(ctx, tp, end, 0)
	if err != nil {
		t.Fatal(err)
	}
	if wm, err := s.Watermarks(ctx, []mirror.TopicPartition{tp}); err != nil || wm[tp].End != end {
		t.Fatalf("Watermarks with an open txn: %+v %v, want End = LSO %d", wm, err, end)
	}
	if len(f.Records) != 0 || f.Next != end || f.Watermarks.End != end {
		t.Fatalf("with an open txn: %d records, next %d, watermarks %+v; want none, %d, End %d", len(f.Records), f.Next, f.Watermarks, end, end)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	f, err = s.Fetch(ctx, tp, end, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Records) != 2 || string(f.Records[0].Value) != "open" || string(f.Records[1].Value) != "after-open" {
		t.Fatalf("after commit got %d records", len(f.Records))
	}
}

func TestFetchOutOfRangeAndWatermarks(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addrs := c.ListenAddrs()
	s := newTestSource(t, addrs, "g-oor")
	ctx := ctxT(t, 10*time.Second)
	produceN(t, newProducer(t, addrs), "prod.test1", 2, 20)
	tp := mirror.TopicPartition{Topic: "prod.test1", Partition: 2}

	wm, err := s.Watermarks(ctx, allPartitions(3, "prod.test1"))
	if err != nil {
		t.Fatal(err)
	}
	if wm[tp] != (mirror.Watermarks{Start: 0, End: 20}) || wm[mirror.TopicPartition{Topic: "prod.test1"}] != (mirror.Watermarks{}) {
		t.Fatalf("watermarks %+v", wm)
	}
	if err := c.DeleteRecords(tp.Topic, tp.Partition, 12); err != nil {
		t.Fatal(err)
	}
	wm, err = s.Watermarks(ctx, []mirror.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if wm[tp] != (mirror.Watermarks{Start: 12, End: 20}) {
		t.Fatalf("after DeleteRecords: %+v", wm[tp])
	}
	f, err := s.Fetch(ctx, tp, 5, 0)
	if !errors.Is(err, mirror.ErrOffsetOutOfRange) {
		t.Fatalf("fetch below log start: %v", err)
	}
	for _, want := range []string{"prod.test1/2", "at 5", "log start 12", "end 20"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if f.Watermarks != wm[tp] {
		t.Errorf("Fetched.Watermarks %+v on out of range, want %+v", f.Watermarks, wm[tp])
	}
	if _, err := s.Fetch(ctx, tp, 25, 0); !errors.Is(err, mirror.ErrOffsetOutOfRange) {
		t.Fatalf("fetch above end: %v", err)
	}
	f, err = s.Fetch(ctx, tp, 12, 0)
	if err != nil || len(f.Records) != 8 || f.Records[0].Offset != 12 {
		t.Fatalf("fetch at log start: %v, %d records", err, len(f.Records))
	}
	if _, err := s.Watermarks(ctx, []mirror.TopicPartition{{Topic: "nope", Partition: 0}}); err == nil {
		t.Fatal("watermarks of a missing topic succeeded")
	}
}

func TestTopicsFresh(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addrs := c.ListenAddrs()
	s := newTestSource(t, addrs, "g-topics")
	ctx := ctxT(t, 10*time.Second)
	names := func() []string {
		t.Helper()
		ts, err := s.Topics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tp := range ts {
			out = append(out, tp.Name)
			if tp.Name == "prod.test1" && tp.Partitions != 3 {
				t.Errorf("prod.test1 has %d partitions", tp.Partitions)
			}
		}
		return out
	}
	if got := names(); !slices.Contains(got, "prod.test1") || !slices.Contains(got, "prod.test2") {
		t.Fatalf("topics %v", got)
	}
	// Warm the Transport's cache, then create a topic behind its back.
	if _, err := s.Watermarks(ctx, []mirror.TopicPartition{{Topic: "prod.test1"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic("prod.new", 2, nil); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Contains(got, "prod.new") {
		t.Fatalf("new topic missing right after creation: %v", got)
	}
	produceN(t, newProducer(t, addrs), "prod.new", 1, 3)
	f, err := s.Fetch(ctx, mirror.TopicPartition{Topic: "prod.new", Partition: 1}, 0, 0)
	if err != nil || len(f.Records) != 3 {
		t.Fatalf("fetch from the new topic: %v (%d records)", err, len(f.Records))
	}
	if err := c.DeleteTopic("prod.test2"); err != nil {
		t.Fatal(err)
	}
	if got := names(); slices.Contains(got, "prod.test2") {
		t.Fatalf("deleted topic still listed: %v", got)
	}

	// A topic created without a Topics call in between: Fetch refreshes
	// the routing cache by itself.
	if err := c.CreateTopic("prod.later", 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fetch(ctx, mirror.TopicPartition{Topic: "prod.later"}, 0, 0); err != nil {
		t.Fatalf("fetch of a topic unknown to the cache: %v", err)
	}
}

func TestCommittedMatchesOffsetFetch(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addrs := c.ListenAddrs()
	s := newTestSource(t, addrs, "g-committed")
	ctx := ctxT(t, 10*time.Second)
	cl, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	want := map[mirror.TopicPartition]int64{
		{Topic: "prod.test1", Partition: 0}: 0,
		{Topic: "prod.test1", Partition: 1}: 42,
		{Topic: "prod.test2", Partition: 2}: 1 << 40,
	}
	if err := cl.Commit(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	all := allPartitions(3, testTopics...)
	got, err := s.Committed(ctx, all)
	if err != nil {
		t.Fatal(err)
	}

	// Independent check with franz-go's raw OffsetFetch.
	kcl := newProducer(t, addrs)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "g-committed"
	for _, topic := range testTopics {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic = topic
		rt.Partitions = []int32{0, 1, 2}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, kcl)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			tp := mirror.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}
			if got[tp] != rp.Offset {
				t.Errorf("%s: Committed %d, OffsetFetch %d", tp, got[tp], rp.Offset)
			}
			if w, ok := want[tp]; ok && got[tp] != w {
				t.Errorf("%s: Committed %d, committed %d", tp, got[tp], w)
			}
			n++
		}
	}
	if n != len(all) || len(got) != len(all) {
		t.Fatalf("compared %d, got %d, want %d", n, len(got), len(all))
	}
}

// TestThreeBrokers checks routing when leaders and the group coordinator are
// spread over brokers, including after a leader moves.
func TestThreeBrokers(t *testing.T) {
	t.Parallel()
	c := newCluster(t, kfake.NumBrokers(3))
	addrs := c.ListenAddrs()
	s := newTestSource(t, addrs[:1], "g-three") // bootstrap from one broker only
	ctx := ctxT(t, 15*time.Second)
	p := newProducer(t, addrs)
	all := allPartitions(3, testTopics...)
	for i, tp := range all {
		produceN(t, p, tp.Topic, tp.Partition, i+1)
	}
	if _, err := s.Topics(ctx); err != nil {
		t.Fatal(err)
	}
	wm, err := s.Watermarks(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	for i, tp := range all {
		if wm[tp].End != int64(i+1) {
			t.Errorf("%s: end %d, want %d", tp, wm[tp].End, i+1)
		}
		f, err := s.Fetch(ctx, tp, 0, 0)
		if err != nil || len(f.Records) != i+1 {
			t.Fatalf("fetch %s: %v, %d records", tp, err, len(f.Records))
		}
	}
	cl, err := s.Claim(ctx, testTopics)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Commit(ctx, map[mirror.TopicPartition]int64{all[4]: 3}); err != nil {
		t.Fatal(err)
	}
	_ = cl.Release(ctx)
	got, err := s.Committed(ctx, all)
	if err != nil || got[all[4]] != 3 || got[all[0]] != mirror.NoOffset {
		t.Fatalf("committed %v %v", got, err)
	}

	// Move a leader behind the Transport's back: Fetch notices
	// NOT_LEADER, refreshes and retries.
	tp := all[1]
	leader := c.LeaderFor(tp.Topic, tp.Partition)
	if err := c.MoveTopicPartition(tp.Topic, tp.Partition, (leader+1)%3); err != nil {
		t.Fatal(err)
	}
	f, err := s.Fetch(ctx, tp, 0, 0)
	if err != nil || len(f.Records) != 2 {
		t.Fatalf("fetch after a leader move: %v, %d records", err, len(f.Records))
	}

	// Watermarks, sent per leader from the Transport's cached metadata,
	// notice a moved leader the same way.
	tp = all[2]
	leader = c.LeaderFor(tp.Topic, tp.Partition)
	if err := c.MoveTopicPartition(tp.Topic, tp.Partition, (leader+1)%3); err != nil {
		t.Fatal(err)
	}
	if wm, err := s.Watermarks(ctx, all); err != nil || wm[tp].End != 3 {
		t.Fatalf("watermarks after a leader move: %v, %s ends at %d (want 3)", err, tp, wm[tp].End)
	}
}

// An idle partition's long polls double, from FetchMaxWait up to
// FetchIdleMaxWait, so idle partitions send few requests; a record produced
// during a long poll is still returned at once; and a fetch that returns
// records sets the wait back to FetchMaxWait.
func TestIdlePartitionLongPollsLonger(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addrs := c.ListenAddrs()
	s := newTestSource(t, addrs, "g-idle", func(o *Options) {
		o.FetchMaxWait, o.FetchIdleMaxWait = 100*time.Millisecond, 2*time.Second
	})
	ctx := ctxT(t, 60*time.Second)
	producer := newProducer(t, addrs)
	produceN(t, producer, "prod.test1", 0, 1)
	tp := mirror.TopicPartition{Topic: "prod.test1", Partition: 0}
	fetch := func(offset int64) (mirror.Fetched, time.Duration) {
		t.Helper()
		start := time.Now()
		f, err := s.Fetch(ctx, tp, offset, 0)
		if err != nil {
			t.Fatalf("fetch at %d: %v", offset, err)
		}
		return f, time.Since(start)
	}
	if f, _ := fetch(0); len(f.Records) != 1 || f.Next != 1 {
		t.Fatalf("first fetch: %d records, next %d", len(f.Records), f.Next)
	}
	// Idle: waits of 100, 200, 400, 800, 1,600 and 2,000 ms.
	for i, want := range []time.Duration{100, 200, 400, 800, 1600, 2000} {
		want *= time.Millisecond
		f, took := fetch(1)
		if len(f.Records) != 0 || f.Next != 1 {
			t.Fatalf("idle fetch %d: %d records, next %d", i, len(f.Records), f.Next)
		}
		if took < want*9/10 || took > want+2*time.Second {
			t.Errorf("idle fetch %d took %s, want its long poll of %s", i, took, want)
		}
	}
	// A record produced 300 ms into a 2 s long poll comes back at once.
	go func() {
		time.Sleep(300 * time.Millisecond)
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte("late")}).FirstErr(); err != nil {
			t.Errorf("produce: %v", err)
		}
	}()
	f, took := fetch(1)
	if len(f.Records) != 1 || f.Next != 2 {
		t.Fatalf("fetch during the produce: %d records, next %d", len(f.Records), f.Next)
	}
	if took > 1500*time.Millisecond {
		t.Errorf("the record produced 300 ms into the long poll came back after %s, want well before its 2 s", took)
	}
	// Records came: the next long poll is FetchMaxWait again.
	if _, took := fetch(2); took > time.Second {
		t.Errorf("the long poll after records took %s, want about 100 ms", took)
	}
}
