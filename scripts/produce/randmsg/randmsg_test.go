package randmsg_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ehmirror/ehmirror/scripts/produce/randmsg"
	"github.com/ehmirror/ehmirror/verify/kafkaconn"
)

// TestGeneratorIsTheSeedsRandomMessage checks the messages: numbered text on
// prod.<base>1..5, keys key-<i mod N> on every KeyEvery-th message, headers
// (with a repeated key and binary bytes) on every HeaderEvery-th, padding,
// and the same sequence for the same seed.
func TestGeneratorIsTheSeedsRandomMessage(t *testing.T) {
	opts := randmsg.Options{Count: 200, Keys: 7, KeyEvery: 2, Headers: true, HeaderEvery: 3, Size: 40, Seed: 9}
	g, err := randmsg.NewGenerator(opts)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := randmsg.NewGenerator(opts)
	topics := map[string]int{}
	for i := 0; !g.Done(); i++ {
		m := g.Next()
		if m2 := again.Next(); m2.Topic != m.Topic {
			t.Fatalf("message %d: topic %s then %s with the same seed", i, m.Topic, m2.Topic)
		}
		topics[m.Topic]++
		text := fmt.Sprintf("This is message number %d", i)
		if !strings.HasPrefix(string(m.Value), text) || len(m.Value) != 40 || strings.Trim(string(m.Value[len(text):]), ".") != "" {
			t.Fatalf("message %d: value %q, want %q padded with dots to 40 bytes", i, m.Value, text)
		}
		wantKey := ""
		if i%2 == 0 {
			wantKey = fmt.Sprintf("key-%d", i%7)
		}
		if string(m.Key) != wantKey || (wantKey == "") != (m.Key == nil) {
			t.Fatalf("message %d: key %q, want %q", i, m.Key, wantKey)
		}
		if got := len(m.Headers) > 0; got != (i%3 == 0) {
			t.Fatalf("message %d: headers %v", i, m.Headers)
		}
	}
	if len(topics) != 5 || topics["prod.test1"] == 0 || topics["prod.test5"] == 0 {
		t.Fatalf("topics %v: want prod.test1..prod.test5", topics)
	}
	h := randmsg.Headers(258)
	traces := 0
	for _, x := range h {
		if x.Key == "trace" {
			traces++
		}
	}
	if traces != 2 || !bytes.Equal(h[len(h)-1].Value, []byte{0x00, 0xff, 0xfe, 2, 1, 0x80}) {
		t.Fatalf("headers %v: want a repeated key and binary bytes", h)
	}
}

// TestProducePrintsLikeTheSeed writes to kfake and checks the printed lines
// and that every message reached Kafka.
func TestProducePrintsLikeTheSeed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, randmsg.TopicNames("x", 5)...))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out bytes.Buffer
	progress := 0
	res, err := randmsg.Produce(ctx, kafkaconn.Config{Brokers: c.ListenAddrs()}, randmsg.Options{TopicBase: "x", Count: 250, Chunk: 100, Out: &out, Progress: func(n int) { progress = n }})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	line := regexp.MustCompile(`^Topic: prod\.x[1-5]\. Message: This is message number (\d+)$`)
	if len(lines) != 250 || !line.MatchString(lines[0]) || !strings.HasSuffix(lines[249], "number 249") || progress != 250 || res.Written != 250 {
		t.Fatalf("got %d lines (first %q), progress %d, written %d", len(lines), lines[0], progress, res.Written)
	}
	client := &kafkago.Client{Addr: kafkago.TCP(c.ListenAddrs()...)}
	var total int64
	for topic, n := range res.PerTopic {
		r, err := client.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: {kafkago.LastOffsetOf(0), kafkago.LastOffsetOf(1)}}})
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		for _, p := range r.Topics[topic] {
			got += p.LastOffset
		}
		if got != int64(n) {
			t.Fatalf("%s holds %d records, produced %d", topic, got, n)
		}
		total += got
	}
	if total != 250 {
		t.Fatalf("Kafka holds %d records, want 250", total)
	}
}

// TestProduceFailsWithoutKafka checks that a dead broker gives an error
// rather than silently dropping messages.
func TestProduceFailsWithoutKafka(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := randmsg.Produce(ctx, kafkaconn.Config{Brokers: []string{"127.0.0.1:1"}}, randmsg.Options{Count: 3})
	if err == nil {
		t.Fatal("want an error with no broker")
	}
}
